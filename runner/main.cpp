// pto-runner: CI orchestration and matrix runner for the PTOAS/pypto NPU CI. See README.md and docs/.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "util/process_env.h"
#include "util/build_commit.h"
#include "util/exit_code.h"

int main(int argc, char** argv) {
  CLI::App app{"pto-runner " PTO_RUNNER_VERSION
               ": runs the NPU CI's jobs/ and models/ with the pinned PTOAS, deduplicated, on NPU card slots"};
  app.set_version_flag("--version", std::string("pto-runner " PTO_RUNNER_VERSION " (git ") + pto::kBuildCommit + ")");
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
  pto::register_tests_command(app, common, exit_code);
  pto::register_import_command(app, common, exit_code);
  pto::register_doctor_command(app, common, exit_code);
  pto::register_sandbox_command(app, common, exit_code);
  pto::register_bisect_command(app, common, exit_code);
  pto::register_supervise_command(app, common, exit_code);
  // `tests mute --help`, `toolchain verify --help`, ...: a subcommand that says nothing of its own exit codes
  // has its parent's.
  pto::inherit_footers(app);
  // `pto-runner task-submit ...`, or this binary run through a symlink named task-submit: the small
  // pto-task-submit binary beside it does that (a process per batch of test cases must start fast).
  std::string self = argv[0];
  bool as_task_submit = self.substr(self.rfind('/') + 1) == "task-submit";
  if (as_task_submit || (argc > 1 && std::string(argv[1]) == "task-submit")) {
    std::string exe = pto::self_executable();
    std::string small = exe.substr(0, exe.rfind('/') + 1) + "pto-task-submit";
    std::vector<char*> args = {small.data()};
    for (int i = as_task_submit ? 1 : 2; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    ::execv(small.c_str(), args.data());
    std::cerr << "pto-runner: cannot run " << small << ": " << std::strerror(errno) << "\n";
    return 126;
  }
  app.add_subcommand("task-submit", "Borrow NPU cards from the daemon's queue and run a command on them (the "
                                    "incumbent task-submit's flags; runs pto-task-submit)")->allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // CLI11 returns 0 for --help/--version and its own codes for usage errors; the spec says 2 for bad usage.
    return rc == 0 ? 0 : pto::to_int(pto::ExitCode::BadInput);
  } catch (const std::exception& e) {
    // Nothing should get here (I/O errors are caught where they happen); if something does, say what and exit
    // with the infrastructure code rather than abort.
    std::cerr << "pto-runner: internal error: " << e.what() << "\n";
    return pto::to_int(pto::ExitCode::Infrastructure);
  }
  return exit_code;
}
