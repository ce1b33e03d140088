#pragma once
// Options every command shares (--root, --config, --devices, --device-groups) and the one way commands load
// the project and its plan, printing load problems the same way everywhere.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "config/project.h"
#include "plan/plan.h"
#include "util/exit_code.h"

namespace pto {

struct CommonOptions {
  LoadOptions load;
};

void add_common_options(CLI::App& app, CommonOptions& opts);
void add_device_options(CLI::App& cmd, CommonOptions& opts);

struct LoadedPlan {
  Project project;
  Plan plan;
};

/// Gives steps without expected-minutes their duration learned from the journal in the state dir
/// (runner.yml state-dir, or `state_dir_flag`), read-only; nothing when there is no journal yet.
void apply_history(LoadedPlan& lp, const std::string& state_dir_flag = "");

/// The daemon to talk to: --server, else $PTO_RUNNER_SERVER, else runner.yml `listen-unix` where this user may
/// use that socket, else its `listen` (of --config or ROOT/runner.yml; a wildcard address means this host), else
/// http://127.0.0.1:8787. No trailing slash.
std::string server_url(const std::string& flag, const CommonOptions& opts);

/// Loads the project and builds the plan for `jobs`. On input errors prints them to stderr and returns
/// nothing (the caller exits 2). Warnings are not printed: `lint` is where they belong.
std::optional<LoadedPlan> load_plan_or_report(const CommonOptions& opts, const std::vector<std::string>& jobs);

}  // namespace pto
