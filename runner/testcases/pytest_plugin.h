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

/// What a step's pytest processes are asked to do: report into `report_dir`, skipping the ids in `skip_file`
/// (a rerun) and running only those in `only_file` (a shard); or, with `collect_dir`, collect only and write the
/// ids found there (a split step's collection: no report).
struct PytestRole {
  std::string report_dir, skip_file, only_file, collect_dir;
  bool allow_empty = false;
};

/// Adds to `env` (NAME=VALUE strings) what a step's pytest processes need: the plugin on PYTHONPATH and in
/// PYTEST_ADDOPTS, and their role.
void add_pytest_env(std::vector<std::string>& env, const std::string& plugin_dir, const PytestRole& role);

}  // namespace pto
