#pragma once
// The project: every definition file under --root, loaded once into typed structs. Nothing after this reads
// YAML again.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "config/job_file.h"
#include "config/model_file.h"
#include "config/runner_config.h"
#include "config/toolchain_config.h"
#include "config/versions_env.h"

namespace pto {

struct LoadOptions {
  std::string root = ".";
  std::string config_file;            // --config; else <root>/runner.yml when it exists
  std::string devices_override;       // --devices
  std::string device_groups_override; // --device-groups
  /// The host's settings, already loaded: used instead of ROOT/runner.yml. A daemon loading a commit under
  /// test sets it, so a pull request's own runner.yml never changes the host (its cards, tokens, paths).
  std::optional<RunnerConfig> host;
};

/// A host the definitions must run on, from the repository (ci/hosts/NAME.yml, runner.yml's shape: its
/// `devices` say the cards, groups and types): what lint checks card counts and types against when no host
/// of its own is given.
struct HostProfile {
  std::string file;  // ci/hosts/NAME.yml
  RunnerConfig host;
};

struct Project {
  std::string root;
  VersionsEnv versions;
  ToolchainConfig toolchain;
  RunnerConfig runner;
  /// No runner.yml, no --devices: the built-in pool stands in for a host nobody described, so what only a
  /// real host can answer (which card types exist) is not checked.
  bool default_host = false;
  /// ci/hosts/*.yml; with a default host, steps' cards are checked against these.
  std::vector<HostProfile> host_profiles;
  std::vector<JobDef> jobs;                 // by file name
  std::map<std::string, ModelFile> models;  // by id (file stem)

  const JobDef* find_job(const std::string& name) const;
};

/// Loads and cross-checks every file; problems go to `diags` (the project is still returned, best effort, so
/// lint can go on to report more).
/// The host's settings alone: runner.yml (or --config) with the --devices/--device-groups overrides. Used by
/// load_project and by the daemon's reload (SIGHUP).
RunnerConfig load_host_config(const LoadOptions& opts, Diagnostics& diags, bool* default_host = nullptr);
Project load_project(const LoadOptions& opts, Diagnostics& diags);
/// A daemon's findings at start, each formatted: the host's settings' errors (runner.yml, its env-file, the
/// command line: it must not start) apart from the definitions' (job and model files: runs are refused, 400
/// with the findings, until they are fixed, since every submission reads them again).
struct StartFindings {
  std::string host, definitions;
};
StartFindings split_start_findings(const Diagnostics& diags, const Project& project, const std::string& root);

/// A path from runner.yml or a flag: `~/` expanded, relative paths taken from the project root, made absolute
/// (steps run in other directories). Empty stays empty.
std::string resolve_under_root(const std::string& root, const std::string& path);

/// Applies the `--lock-dir`/`--state-dir` flags (empty: keep runner.yml's) and resolves both directories with
/// resolve_under_root, so `lock-dir: locks` in runner.yml means ROOT/locks whatever the current directory;
/// likewise a `source.repo` or `source.mirror` given as a path.
void resolve_host_dirs(RunnerConfig& cfg, const std::string& root, const std::string& lock_dir_flag,
                       const std::string& state_dir_flag);

/// Applies --devices / --device-groups over runner.yml. Returns "" or the problem.
std::string apply_device_overrides(RunnerConfig& cfg, const std::string& devices, const std::string& groups);

}  // namespace pto
