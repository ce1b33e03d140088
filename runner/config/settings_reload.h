#pragma once
// SIGHUP (docs/operators.md, "Reload"): runner.yml read again against the settings in force. What can change
// while runs are active moves over and each difference is said; what cannot (where it listens, its state and
// lock directories, the source repository, containment, executor, slurm, supervise, sandbox users) is said to
// need a restart and stays as the daemon started with it. Pure: the daemon applies the answer (its cards, its
// token, its receivers are the host's, the access's and the notices' own to compare).
#include <optional>
#include <string>
#include <vector>

#include "config/project.h"
#include "config/runner_config.h"

namespace pto {

struct SettingsReload {
  RunnerConfig applied;            // `now` with the live settings of `next`
  std::vector<std::string> said;   // one line per difference, as the daemon logs them
};

SettingsReload reload_settings(const RunnerConfig& now, const RunnerConfig& next);

/// runner.yml read again as the daemon read it at start (with the flags' `lock_dir` and `state_dir`): the
/// settings, or nothing with every error in `errors`, one finding a line.
std::optional<RunnerConfig> reread_host_settings(const LoadOptions& load, const std::string& lock_dir, const std::string& state_dir,
                                                 std::string& errors);

}  // namespace pto
