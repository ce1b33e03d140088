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
/// --server and --token-file of a client command (status, submit, bisect, tests): one help text, as
/// server_url() and client_token() find them. `token_use`: what this command needs the token for.
void add_daemon_options(CLI::App& cmd, std::string& server, std::string& token_file, const std::string& token_use);
/// A command's footer: what it says, then its exit codes, then where the options every command takes go.
void add_footer(CLI::App& cmd, const std::string& exit_codes, const std::string& note = "");
/// Every subcommand below `app` without a footer gets its parent's (exit codes shared by `tests mute|unmute|list`).
void inherit_footers(CLI::App& app);

struct LoadedPlan {
  Project project;
  Plan plan;
};

/// Gives steps without expected-minutes their duration learned from the journal in the state dir
/// (runner.yml state-dir, or `state_dir_flag`), read-only; nothing when there is no journal yet.
void apply_history(LoadedPlan& lp, const std::string& state_dir_flag = "");

/// The host settings a client command reads when it is not told where the daemon is: --config, else
/// $PTO_RUNNER_CONFIG, else ROOT/runner.yml, else an installed host's /etc/pto-runner/runner.yml; "" when
/// there is none.
std::string host_config_file(const CommonOptions& opts);

/// The daemon to talk to: --server, else $PTO_RUNNER_SERVER, else host_config_file()'s `listen-unix` where this
/// user may use that socket, else its `listen` (a wildcard address means this host), else
/// http://127.0.0.1:8787. No trailing slash.
std::string server_url(const std::string& flag, const CommonOptions& opts);

/// The token a client command shows: --token-file, else $PTO_RUNNER_TOKEN, else the token of
/// host_config_file()'s daemon (its token-file, or the one it made in its state dir) where this user may read it
/// (root on an installed host). "" when there is none; `error` when a named file cannot be read.
std::string client_token(const std::string& token_file_flag, const CommonOptions& opts, std::string& error);

/// Where a client command looks for the daemon, said when it finds none (exit 2 rather than acting on cards
/// it made up).
std::string where_daemons_are_looked_for(const CommonOptions& opts);

/// Loads the project and builds the plan for `jobs`. On input errors prints them to stderr and returns
/// nothing (the caller exits 2). Warnings are not printed: `lint` is where they belong.
std::optional<LoadedPlan> load_plan_or_report(const CommonOptions& opts, const std::vector<std::string>& jobs);

}  // namespace pto
