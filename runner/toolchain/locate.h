#pragma once
// Finding the PTOAS executable in an install root, and the smoke check that proves it runs.
//
// The probe list (toolchain/ptoas.yml `probe`, default ptoas, ptoas.sh, bin/ptoas) is tried in order: the
// first regular file with an execute bit wins; a directory of that name (v0.51-v0.54 ship a Python package
// directory called `ptoas`) is skipped. There is never a PATH fallback: a PTOAS that is not the pinned one
// must not be picked up by accident.
#include <optional>
#include <string>
#include <vector>

#include "exec/run_as.h"

namespace pto {

struct LocateResult {
  bool ok = false;
  std::string bin;
  std::vector<std::string> tried;  // "path (why not)"
  std::string error;
};

LocateResult locate_executable(const std::string& root, const std::vector<std::string>& probe);

struct SmokeResult {
  bool ok = false;
  std::string output;
  std::string error;
};

/// Runs `bin args...`; it must exit 0, and print the pinned version number when one is given.
SmokeResult smoke_check(const std::string& bin, const std::vector<std::string>& args,
                        const std::string& version_number, const std::string& log_path,
                        const std::optional<RunAs>& run_as = std::nullopt);

}  // namespace pto
