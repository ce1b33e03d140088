#pragma once
// Running one command to completion from synchronous code (the toolchain's smoke check, venv and pip, git), with
// the same supervision as a step: own process group, timeout, SIGTERM then SIGKILL, sweep of escapees.
#include <string>
#include <vector>

#include "exec/executor.h"

namespace pto {

struct SyncResult {
  StepOutcome outcome;
  std::string output;  // stdout and stderr, merged
};

/// `argv` is run directly (quoted into a bash command line); `env` is the complete environment.
SyncResult run_sync(const std::vector<std::string>& argv, const std::vector<std::string>& env, double timeout_seconds,
                    const std::string& log_path);

}  // namespace pto
