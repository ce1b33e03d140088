#pragma once
// One register_* function per command, each in its own file under commands/. A command's callback sets
// `exit_code`; main() returns it.
#include <CLI/CLI.hpp>

#include "commands/common_options.h"

namespace pto {

void register_lint_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_plan_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_run_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_toolchain_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_serve_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_submit_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_status_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_devices_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_tests_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_import_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_doctor_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_sandbox_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_bisect_command(CLI::App& app, CommonOptions& common, int& exit_code);
void register_supervise_command(CLI::App& app, CommonOptions& common, int& exit_code);

}  // namespace pto
