#pragma once
// GitMirror: the commits under test, from a bare mirror of the source repository into one worktree per run.
//
// The mirror is created on first use and fetched only for a commit it lacks (`git fetch origin SHA`, then
// every branch, pull request head and pull request merge commit (`refs/pull/N/merge`: the commit a workflow's
// github.sha names for a pull request) for servers that refuse a bare sha). One process at a time changes it:
// a flock on MIRROR.lock, held through the fetch and the `git worktree add`, so two daemons or two runs
// never fetch into one mirror at once; a caller that waits longer than `lock_timeout_seconds` gets an error
// naming the holder. Every call blocks (git runs to completion): call it off the engine thread.
#include <string>
#include <vector>

#include "config/runner_config.h"

namespace pto {

enum class SourceError {
  None,
  BadCommit,      // not a full hex sha: the request is wrong (400)
  UnknownCommit,  // the repository is reachable and has no such commit (400)
  Unreachable,    // the repository cannot be reached or read (infrastructure: 503, submit exits 3)
  Busy,           // another fetch held the mirror past the lock timeout (503)
  Failed,         // git failed otherwise: disk, permissions (503)
};

struct SourceResult {
  SourceError error = SourceError::None;
  std::string message;  // names the sha, repository or path involved
  bool ok() const { return error == SourceError::None; }
};

class GitMirror {
 public:
  /// `mirror` must already be resolved (absolute); `log_dir` receives git's output for failures.
  explicit GitMirror(SourceConfig cfg);

  /// Makes `sha` available in the mirror and checks it out, detached, at `dir` (which must not exist), with
  /// submodules when configured. On failure nothing is left at `dir` and the mirror holds no worktree of it.
  SourceResult checkout(const std::string& sha, const std::string& dir);
  /// Removes a worktree made by checkout() (missing is fine).
  void remove(const std::string& dir);
  /// The first-parent commits after `good` up to `bad` (included), oldest first (`git log --first-parent
  /// --reverse GOOD..BAD`), both fetched when the mirror lacks them. Empty with BadCommit when `good` is not an
  /// ancestor of `bad`'s first-parent line.
  /// `subjects`, when given: each commit's subject line, beside `path` (what a person reads to find a culprit).
  SourceResult first_parent_path(const std::string& good, const std::string& bad, std::vector<std::string>& path,
                                 std::vector<std::string>* subjects = nullptr);
  /// The commit a pull request's `sha` was built on: with `test_merge` (the run's ref is GitHub's
  /// refs/pull/N/merge) the merge's first parent, else its merge base with `main_ref` (fetched from the
  /// repository): a head commit that merged main into itself is a merge too, and its first parent is its own.
  SourceResult merge_base(const std::string& sha, const std::string& main_ref, bool test_merge, std::string& base);

  const SourceConfig& config() const { return cfg_; }

 private:
  SourceResult ensure_commit(const std::string& sha);  // creates the mirror on first use
  SourceResult fetch_commit(const std::string& sha);   // fetches only what is missing
  /// The submodules of the worktree `dir` (a superproject fetched from `base`), each URL checked against
  /// source.submodule-urls first (source/submodule_urls), level by level. BadCommit names a refused one.
  SourceResult update_submodules(const std::string& sha, const std::string& dir, const std::string& base, int depth);
  void clear_stale_locks();
  SourceConfig cfg_;
};

/// A full commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
bool is_full_sha(const std::string& s);

}  // namespace pto
