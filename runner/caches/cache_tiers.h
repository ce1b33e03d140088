#pragma once
// RunCaches: where one run's named caches are (`caches: {NAME: ENV_VAR}` on its jobs and steps) and which tier
// it may write, as GitHub scopes caches by branch (SPEC "Nothing built twice"). Under runner.yml's caches.dir:
//
//   NAME/protected/        written by protected refs' runs only (caches.protected-refs: main, merge queues).
//                          root:GROUP (caches.group), 2775: a protected run's steps write it as members of
//                          GROUP, which no other run's steps are; what they wrote goes to root when the run
//                          ends (reclaim), so a sandbox user lent later to a pull request owns nothing there.
//   NAME/scopes/SCOPE/     one per pull request (pr-N) or other ref (ref-...; local without one): read and
//                          written by that scope's runs alone, handed to the run's sandbox user (0700) at its
//                          start, never read by a protected run or another scope.
//
// Every run reads the protected tier. A ccache cache (its variable is CCACHE_DIR) reads it through ccache's
// own secondary storage: the protected tier is ccache's `file:` remote layout, written by protected runs
// (`remote_only`, with `update-mtime` so the least recently used can be pruned) and read by the others as
// `file:DIR|read-only` beside their own primary CCACHE_DIR: no copy, and nothing they write reaches it. Other
// caches (pip, uv) of an unprotected run get their own tier only, cold at first: an overlay of the protected
// tier would hand the run's user directories it cannot write (docs/choices.md, "Caches").
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/runner_config.h"
#include "exec/run_as.h"

namespace pto {

/// The tier a run of a ref writes: the protected one, or its scope's.
struct CacheScope {
  bool writes_protected = false;
  std::string name;  // "protected", "pr-7", "ref-feature-x", "local"
  /// Of a run of `ref` ("" for none): protected when `protected_ref` (and, with a sandbox, the cache group exists).
  static CacheScope of(const std::string& ref, bool protected_ref);
};

class RunCaches {
 public:
  /// The caches of a run in `run_dir` of scope `scope`. `group`: the cache group's gid, which a protected run's
  /// sandbox user is given (nothing without a sandbox: the steps are root's, as is every tier).
  /// `remote_credential`: caches.remote's `user:password`, given to a protected run's ccache only.
  RunCaches(const CachesConfig& cfg, CacheScope scope, std::string run_dir, std::optional<gid_t> group,
            std::string remote_credential = "");

  const CacheScope& scope() const { return scope_; }
  /// caches.remote's credential, a protected run's only ("" otherwise): masked in its logs.
  const std::string& remote_credential() const { return remote_credential_; }
  std::optional<gid_t> group() const { return scope_.writes_protected ? group_ : std::nullopt; }
  /// The variables a step with cache `name` in `var` gets (its directory, and for a ccache its storage, its
  /// statistics log `stats_log` and its umask).
  std::vector<std::pair<std::string, std::string>> step_env(const std::string& name, const std::string& var,
                                                            const std::string& stats_log) const;
  /// Blocking (a tier may hold many files): the tiers of `names` made, the scope's handed to `user` (nullptr:
  /// no sandbox). Regular files with more than one link are removed from a scope's tier: a hard link made by
  /// an earlier run could name a file of the protected tier. "" or the first problem.
  std::string prepare(const std::map<std::string, std::string>& names, const RunAs* user) const;
  /// Blocking, at the run's end and before its user is lent again: what `uid` made in the protected tiers goes
  /// to root (group-writable, so the next protected run writes on). "" or the first problem.
  std::string reclaim(const std::map<std::string, std::string>& names, uid_t uid) const;

  static bool is_ccache(const std::string& var) { return var == "CCACHE_DIR"; }
  std::string protected_tier(const std::string& name) const;
  std::string scope_tier(const std::string& name) const;

 private:
  CachesConfig cfg_;
  CacheScope scope_;
  std::string run_dir_;
  std::optional<gid_t> group_;
  std::string remote_credential_;
};

/// The caches of a run of `ref` in `run_dir` on a host with `cfg`: the protected tier when the ref is protected
/// and, with a sandbox (`sandboxed`), the cache group exists (else the run writes its own scope, said in the log);
/// a protected run's remote credential read from caches.remote's credential-file (root's).
std::shared_ptr<const RunCaches> caches_for_run(const RunnerConfig& cfg, const std::string& ref, const std::string& run_dir, bool sandboxed);

}  // namespace pto
