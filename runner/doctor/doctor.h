#pragma once
// `pto-runner doctor`: a host checked against what pypto's jobs and pto-runner need, one line per check with
// the fix for each that fails. Read-only: it looks, it changes nothing (no user, no directory, no lock).
//   cards       each card's files (devices.card-files) and the shared control files, and their group
//   locks       the lock dir (root's, not writable by others) and the incumbent's lock files and lock-name
//   incumbent   another task-submit on PATH or running, and what it holds
//   cgroup      cgroup v2 with delegation (cgroup.kill) for per-step containment
//   sandbox     the sandbox users (sandbox.users, count) exist
//   token       the admin token file: root's, readable by nobody else
//   python      the interpreter of a wheel pin, of the wheel's CPython version
//   npu-smi     on PATH (pypto's setup runs `npu-smi info`)
//   env         the variables the definitions require of the host (`${NAME:?...}`, names they unset) in env/env-file
//   state dir   writable
#include <string>
#include <vector>

#include "config/project.h"

namespace pto {

enum class CheckStatus { Ok, Warn, Fail };

struct CheckResult {
  std::string name;
  CheckStatus status = CheckStatus::Ok;
  std::string detail;
  std::string fix;  // for Warn and Fail: what to do
};

struct DoctorReport {
  std::vector<CheckResult> checks;
  /// 0 every check ok, 1 warnings, 2 a check failed.
  int exit_code() const;
};

struct DoctorOptions {
  std::string token_file;  // overrides runner.yml token-file (as serve's --token-file)
};

/// `project` was loaded as `serve` would load it (its runner.yml's directories resolved).
DoctorReport run_doctor(const Project& project, const DoctorOptions& opts);

std::string to_string(CheckStatus s);

}  // namespace pto
