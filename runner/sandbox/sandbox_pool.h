#pragma once
// SandboxPool: the sandbox users (runner.yml sandbox: pto-step0 .. pto-step{count-1}) and which run has each,
// as Nix lends nixbld1..N to builds: one user to each active run for all its steps and leases, so two runs
// never share a uid (no /proc/PID/environ, no ptrace, no signal, no file of one reaches the other). A user is
// lent to no other run until its run has ended and nothing of it runs.
//
// Whether the pool is active is decided once, at start: the daemon is root, `sandbox` is not off, and every
// user exists. Otherwise why() says so, and the daemon says it loudly (log, status, page).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "exec/run_as.h"

namespace pto {

class SandboxPool {
 public:
  explicit SandboxPool(const SandboxConfig& cfg);
  bool active() const { return why_not_.empty(); }
  /// Why steps run as the daemon's own user ("" when the pool is active).
  const std::string& why() const { return why_not_; }
  /// A free user for `run`, or nothing when all are lent.
  std::optional<RunAs> lend(const std::string& run);
  /// The user `run` had goes back (its run ended and nothing of it runs).
  void give_back(const std::string& run);
  std::size_t free_count() const;
  std::size_t size() const { return users_.size(); }
  /// The user lent to `run`, if any.
  const RunAs* of(const std::string& run) const;

 private:
  std::vector<RunAs> users_;
  std::map<std::string, std::size_t> lent_;  // run -> index into users_
  std::string why_not_;
};

/// `pto-runner sandbox setup`: makes the missing sandbox users (useradd: system users without a home or a
/// login shell, each with its own group, in `sandbox.groups`). Lines of what it did; "" error or why not.
std::vector<std::string> setup_sandbox_users(const SandboxConfig& cfg, std::string& error);
/// `pto-runner sandbox remove`: removes them (userdel).
std::vector<std::string> remove_sandbox_users(const SandboxConfig& cfg, std::string& error);

}  // namespace pto
