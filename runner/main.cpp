// pto-runner: CI orchestration and matrix runner for the PTOAS/pypto NPU CI. See README.md.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "util/exit_code.h"

int main(int argc, char** argv) {
  CLI::App app{"pto-runner " PTO_RUNNER_VERSION
               ": runs the NPU CI's jobs/ and models/ with the pinned PTOAS, deduplicated, on NPU card slots"};
  app.set_version_flag("--version", PTO_RUNNER_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // --root and --config may follow the command name
  pto::CommonOptions common;
  pto::add_common_options(app, common);
  int exit_code = 0;
  pto::register_lint_command(app, common, exit_code);
  pto::register_plan_command(app, common, exit_code);
  pto::register_run_command(app, common, exit_code);
  pto::register_toolchain_command(app, common, exit_code);
  pto::register_serve_command(app, common, exit_code);
  pto::register_submit_command(app, common, exit_code);
  pto::register_status_command(app, common, exit_code);
  pto::register_devices_command(app, common, exit_code);
  pto::register_task_submit_command(app, common, exit_code);
  // Run through a symlink named task-submit, it is that command: the incumbent's name, its flags.
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string self = argv[0];
  if (self.substr(self.rfind('/') + 1) == "task-submit") args.insert(args.begin(), "task-submit");
  std::reverse(args.begin(), args.end());  // CLI11 takes them in reverse
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // CLI11 returns 0 for --help/--version and its own codes for usage errors; the spec says 2 for bad usage.
    return rc == 0 ? 0 : pto::to_int(pto::ExitCode::BadInput);
  }
  return exit_code;
}
