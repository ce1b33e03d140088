#pragma once
// pto-runner's pytest plugin (testcases/pto_runner_pytest.py, compiled into the binary) and the environment
// that makes every pytest process of a step load it without changing the step's command: its directory first
// on PYTHONPATH, `-p pto_runner_pytest` appended to PYTEST_ADDOPTS (which pytest reads after the host's), and
// where to write (SPEC "Test results"; DESIGN "pytest without changing the command").
#include <string>
#include <string_view>
#include <vector>

namespace pto {

std::string_view pytest_plugin_source();

/// Writes the plugin into `dir` (made 0755 and the file 0644, both root's: a step reads it, never changes it)
/// unless it is there with the same text. "" or the problem.
std::string install_pytest_plugin(const std::string& dir);

/// Adds to `env` (NAME=VALUE strings) what a step's pytest processes need: the plugin on PYTHONPATH and in
/// PYTEST_ADDOPTS, the report directory, and for a rerun the file of ids already done.
void add_pytest_env(std::vector<std::string>& env, const std::string& plugin_dir, const std::string& report_dir,
                    const std::string& skip_file, bool allow_empty);

}  // namespace pto
