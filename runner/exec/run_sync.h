#pragma once
// Running one command to completion from synchronous code (the toolchain's smoke check, venv and pip, git), with
// the same supervision as a step: own process group, timeout, SIGTERM then SIGKILL, sweep of escapees.
#include <optional>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace pto {

struct SyncResult {
  StepOutcome outcome;
  std::string output;  // stdout and stderr, merged
};

/// `argv` is run directly (quoted into a bash command line); `env` is the complete environment; with `run_as`,
/// as that user (in /, not the caller's directory).
SyncResult run_sync(const std::vector<std::string>& argv, const std::vector<std::string>& env, double timeout_seconds,
                    const std::string& log_path, const std::optional<RunAs>& run_as = std::nullopt);

}  // namespace pto
