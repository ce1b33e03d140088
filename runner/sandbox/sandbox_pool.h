#pragma once
// SandboxPool: the sandbox users (runner.yml sandbox: pto-step0 .. pto-step{count-1}) and which run has each,
// as Nix lends nixbld1..N to builds: one user to each active run for all its steps and leases, so two runs
// never share a uid (no /proc/PID/environ, no ptrace, no signal, no file of one reaches the other). A user is
// lent to no other run until its run has ended and nothing of it runs.
//
// Whether the pool is active is decided once, at start: the daemon is root, `sandbox` is not off, and every
// user exists. Otherwise why() says so, and the daemon says it loudly (log, status, page).
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "exec/run_as.h"
#include "sandbox/user_lender.h"

namespace pto {

class SandboxPool : public UserLender {
 public:
  /// `shared_files`: the control files every step may open (devices.shared-files), granted to a user while it
  /// is lent. `card_files`: every card's files, from which a returned user's entries are removed whatever
  /// happened to its steps (a daemon killed mid-step leaves them). `lock_dir` (devices.lock-dir): a lent user is flocked there (sandbox-NAME.lock), so a daemon and
  /// foreground `run`s on one host never lend one user twice at once.
  SandboxPool(const SandboxConfig& cfg, std::vector<std::string> shared_files, std::vector<std::string> card_files, std::string lock_dir);
  ~SandboxPool() override;
  bool active() const override { return why_not_.empty(); }
  /// Why steps run as the daemon's own user ("" when the pool is active).
  const std::string& why() const override { return why_not_; }
  /// A free user for `run`, or nothing when all are lent.
  std::optional<RunAs> lend(const std::string& run) override;
  /// User `name` for `run` again (a run taken over from an earlier daemon), unless another run has it.
  std::optional<RunAs> lend_again(const std::string& run, const std::string& name) override;
  /// The user `run` had goes back once its run ended: whatever still runs as it is killed and what it left
  /// (IPC objects, files in world-writable directories: sandbox/user_leftovers) removed, so the next run it is
  /// lent to finds nothing of this one. Returns what was swept, for the log ("" when nothing).
  std::string give_back(const std::string& run) override;
  std::function<std::string()> leftovers_sweep(const std::string& run) override;
  std::size_t free_count() const;
  /// Whether lend() may find a user (active, and not every user is lent by this pool).
  bool lend_possible() const { return active() && free_count() > 0; }
  std::size_t size() const { return users_.size(); }
  /// The user lent to `run`, if any.
  const RunAs* of(const std::string& run) const;

 private:
  /// Lends users_[i] to `run` when no other pto-runner on the host has it (its lock).
  bool lend_index(const std::string& run, std::size_t i);
  std::vector<RunAs> users_;
  std::map<std::string, std::size_t> lent_;  // run -> index into users_
  std::map<std::size_t, int> locks_;          // index -> its flocked lock file
  std::set<std::string> swept_apart_;          // runs whose sweep leftovers_sweep handed out: give_back skips it
  // The host's world-writable directories found on a thread of their own at start (a walk of /), not at the
  // first run's end: the future's destructor waits for it.
  std::future<void> dirs_found_;
  std::string lock_dir_;
  std::vector<std::string> shared_files_, card_files_;
  std::string why_not_;
};

/// The daemon's pool (`serve`): its users, and the state dir closed to others (sandbox/run_tree). Without
/// users it is still made, inactive, and said loudly (steps then run as the daemon's own uid). "" or the host's
/// problem in `error`; `unreachable` names a place the users must reach and cannot (the state dir, and
/// `steps_root` when not ""): runner.yml's or the flags' fault.
std::unique_ptr<SandboxPool> open_daemon_sandbox(const RunnerConfig& cfg, const std::string& state_dir, const std::string& steps_root,
                                                 std::string& error, std::string& unreachable);

/// `pto-runner sandbox setup`: makes the missing sandbox users (useradd: system users without a home or a
/// login shell, each with its own group, in `sandbox.groups`). Lines of what it did; "" error or why not.
/// `cache_group` (caches.group): made too when missing, with no member: a protected run's steps get it as a
/// supplementary group for that run alone (caches/cache_tiers).
std::vector<std::string> setup_sandbox_users(const SandboxConfig& cfg, const std::string& cache_group, std::string& error);
/// `pto-runner sandbox remove`: removes them (userdel), and the cache group.
std::vector<std::string> remove_sandbox_users(const SandboxConfig& cfg, const std::string& cache_group, std::string& error);

}  // namespace pto
