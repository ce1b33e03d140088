#pragma once
// Finding and killing every process that carries a step's marker in its environment.
//
// A process group catches most descendants, but not one that called setsid() (or setpgid) to escape it,
// which is exactly what leaked cards under task-submit. Every step exports PTO_RUNNER_STEP_MARK=<unique
// value>; environments are inherited, so /proc/<pid>/environ finds the escapees. (A process that scrubs its
// own environment escapes this too; that is documented, not handled.)
#include <string>
#include <vector>

namespace pto {

constexpr const char* kStepMarkVar = "PTO_RUNNER_STEP_MARK";

/// Pids (other than this process) whose environment holds PTO_RUNNER_STEP_MARK=<marker>.
std::vector<int> find_marked_processes(const std::string& marker);

/// Sends `sig` to every marked process, repeating until none is left or `rounds` pass (a process may fork
/// while being killed). Returns how many were signalled.
int kill_marked_processes(const std::string& marker, int sig, int rounds = 5);

/// Pids whose environment holds PTO_RUNNER_STEP_MARK with a value starting with `prefix` (a whole run's).
std::vector<int> find_processes_with_mark_prefix(const std::string& prefix);

}  // namespace pto
