#include "source/git_mirror.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "exec/run_sync.h"
#include "source/submodule_urls.h"
#include "util/lock_file.h"
#include "util/process_env.h"
#include "util/clock.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

// git with a fixed, quiet environment: no prompts for credentials (a CI daemon has nobody to answer), no
// pager, and submodules over file:// allowed (test repositories and local mirrors are paths). Git never runs
// code a run wrote: no hook from the mirror's hooks/ or a worktree's config (core.hooksPath points at nothing),
// no fsmonitor, no configured editor or credential helper; these come first on the command line, where a
// repository's own config cannot override them.
SyncResult git(const std::vector<std::string>& args, double timeout_seconds) {
  std::vector<std::string> argv = {"git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
                                   "-c", "credential.helper=", "-c", "core.sshCommand=ssh",
                                   "-c", "protocol.file.allow=always", "-c", "advice.detachedHead=false"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = environment_list();
  env.push_back("GIT_TERMINAL_PROMPT=0");
  env.push_back("GIT_ASKPASS=true");
  env.push_back("GIT_PAGER=cat");
  return run_sync(argv, env, timeout_seconds, "/dev/null");
}

std::string last_lines(const std::string& output, std::size_t max = 400) {
  std::string s = output;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > max) s = "..." + s.substr(s.size() - max);
  return s;
}

/// flock on MIRROR.lock, polled until the timeout; the holder's pid is written into the file.
class MirrorLock {
 public:
  MirrorLock(const std::string& path, double timeout_seconds) {
    fd_ = open_private_lock_file(path, "the mirror lock", error_);
    if (fd_ < 0) return;
    auto until = steady_now() + std::chrono::duration<double>(timeout_seconds);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (steady_now() >= until) {
        char buf[64] = {0};
        ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
        std::string holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
        error_ = "the source mirror is locked by another fetch (" + (holder.empty() ? std::string("holder unknown") : holder) +
                 ", lock " + path + ") for more than " + std::to_string(static_cast<int>(timeout_seconds)) + " s";
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string me = "pid " + std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, me.data(), me.size(), 0);
    locked_ = true;
  }
  ~MirrorLock() {
    if (fd_ >= 0) ::close(fd_);  // closing drops the flock
  }
  bool locked() const { return locked_; }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
  std::string error_;
};

}  // namespace

bool is_full_sha(const std::string& s) {
  return (s.size() == 40 || s.size() == 64) && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

GitMirror::GitMirror(SourceConfig cfg) : cfg_(std::move(cfg)) {}

SourceResult GitMirror::ensure_commit(const std::string& sha) {
  std::error_code ec;
  const bool created = !fs::exists(fs::path(cfg_.mirror) / "HEAD", ec) && !ec;
  // What this call may take away again: the directory if it made it, or what it put into an empty one. A
  // directory that held anything else is never touched.
  const bool made_dir = created && !fs::exists(cfg_.mirror, ec);
  const bool was_empty = created && !made_dir && fs::is_empty(cfg_.mirror, ec) && !ec;
  auto undo = [&] {
    std::error_code rm;
    if (made_dir) {
      fs::remove_all(cfg_.mirror, rm);
    } else if (was_empty) {
      for (const auto& e : fs::directory_iterator(cfg_.mirror, rm)) fs::remove_all(e.path(), rm);
    }
  };
  if (created) {
    if (!made_dir && !was_empty)
      return {SourceError::Failed, "the source mirror " + cfg_.mirror + " is neither a git mirror nor an empty directory"};
    // Created here, empty, then fetched like any other commit: "first use" costs one fetch, not a full clone
    // before the first answer.
    fs::create_directories(cfg_.mirror, ec);
    SyncResult init = git({"init", "--quiet", "--bare", cfg_.mirror}, 60);
    if (!init.outcome.ok()) {
      undo();
      return {SourceError::Failed, "cannot create the source mirror " + cfg_.mirror + ": " + last_lines(init.output)};
    }
  } else {
    clear_stale_locks();
  }
  SourceResult r = fetch_commit(sha);
  // A mirror made by this call whose first fetch failed is nothing worth keeping: no empty mirror is left.
  if (!r.ok() && created) undo();
  return r;
}

void GitMirror::clear_stale_locks() {
  // Under our flock no fetch of ours runs in the mirror, so a `*.lock` git left (a fetch killed at its timeout)
  // is stale and would make later fetches fail ("Unable to create '...lock': File exists"). Steps' own git in
  // their worktrees shares the mirror's refs and config, though: only a lock older than a whole fetch may go.
  const auto stale_before = file_time_now() -
                            std::chrono::duration_cast<fs::file_time_type::duration>(
                                std::chrono::duration<double>(cfg_.fetch_timeout_seconds + 60));
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(cfg_.mirror, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it.depth() == 0 && (name == "objects" || name == "worktrees")) {
      it.disable_recursion_pending();
      continue;
    }
    std::error_code entry;  // an entry that cannot be read is left alone; the walk goes on
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".lock") == 0 && it->is_regular_file(entry) &&
        fs::last_write_time(it->path(), entry) < stale_before && !entry) {
      std::error_code rm;
      fs::remove(it->path(), rm);
    }
  }
}

SourceResult GitMirror::fetch_commit(const std::string& sha) {
  const double t = cfg_.fetch_timeout_seconds;
  const std::string gd = "--git-dir=" + cfg_.mirror;
  auto has = [&] { return git({gd, "cat-file", "-e", sha + "^{commit}"}, 60).outcome.ok(); };
  if (has()) return {};  // fetches only what is missing
  SyncResult f = git({gd, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", cfg_.repo, sha}, t);
  if (f.outcome.ok() && has()) return {};
  // The server may refuse a bare sha: is it reachable at all, and does any branch or pull request have it?
  SyncResult ls = git({"ls-remote", "--heads", cfg_.repo}, t);
  if (!ls.outcome.ok())
    return {SourceError::Unreachable, "cannot reach the source repository " + cfg_.repo + ": " + last_lines(ls.output)};
  SyncResult all = git({gd, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--prune", cfg_.repo,
                        "+refs/heads/*:refs/heads/*", "+refs/pull/*/head:refs/pull/*/head", "+refs/pull/*/merge:refs/pull/*/merge"}, t);
  if (has()) return {};
  if (!all.outcome.ok() && all.output.find("refs/pull") == std::string::npos)
    return {SourceError::Failed, "fetching from " + cfg_.repo + " failed: " + last_lines(all.output)};
  return {SourceError::UnknownCommit, "commit " + sha + " does not exist in " + cfg_.repo};
}

SourceResult GitMirror::checkout(const std::string& sha, const std::string& dir) {
  if (!is_full_sha(sha)) return {SourceError::BadCommit, "sha '" + sha + "' is not a full commit id (40 hex digits)"};
  std::error_code ec;
  fs::create_directories(fs::path(cfg_.mirror).parent_path(), ec);
  MirrorLock lock(cfg_.mirror + ".lock", cfg_.lock_timeout_seconds);
  if (!lock.locked()) return {SourceError::Busy, lock.error()};
  SourceResult r = ensure_commit(sha);
  if (!r.ok()) return r;
  fs::create_directories(fs::path(dir).parent_path(), ec);
  SyncResult add = git({"--git-dir=" + cfg_.mirror, "worktree", "add", "--quiet", "--detach", dir, sha}, cfg_.fetch_timeout_seconds);
  if (!add.outcome.ok()) {
    std::error_code rm;
    fs::remove_all(dir, rm);
    git({"--git-dir=" + cfg_.mirror, "worktree", "prune"}, 300);
    return {SourceError::Failed, "cannot check out " + sha + " into " + dir + ": " + last_lines(add.output)};
  }
  if (cfg_.submodules) {
    SourceResult sub = update_submodules(sha, dir, cfg_.repo, 0);
    if (!sub.ok()) {
      git({"--git-dir=" + cfg_.mirror, "worktree", "remove", "--force", "--force", dir}, 300);
      std::error_code rm;
      fs::remove_all(dir, rm);
      return sub;
    }
  }
  return {};
}

SourceResult GitMirror::first_parent_path(const std::string& good, const std::string& bad, std::vector<std::string>& path,
                                          std::vector<std::string>* subjects) {
  path.clear();
  for (const std::string* sha : {&good, &bad})
    if (!is_full_sha(*sha)) return {SourceError::BadCommit, "sha '" + *sha + "' is not a full commit id (40 hex digits)"};
  std::error_code ec;
  fs::create_directories(fs::path(cfg_.mirror).parent_path(), ec);
  MirrorLock lock(cfg_.mirror + ".lock", cfg_.lock_timeout_seconds);
  if (!lock.locked()) return {SourceError::Busy, lock.error()};
  for (const std::string* sha : {&good, &bad})
    if (SourceResult r = ensure_commit(*sha); !r.ok()) return r;
  SyncResult anc = git({"--git-dir=" + cfg_.mirror, "merge-base", "--is-ancestor", good, bad}, 60);
  if (!anc.outcome.ok()) return {SourceError::BadCommit, "good " + good + " is not an ancestor of bad " + bad};
  SyncResult list = git({"--git-dir=" + cfg_.mirror, "log", "--first-parent", "--reverse", "--format=%H %s", good + ".." + bad}, 120);
  if (!list.outcome.ok()) return {SourceError::Failed, "cannot list the commits from " + good + " to " + bad + ": " + last_lines(list.output)};
  std::istringstream in(list.output);
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 40 || !is_full_sha(line.substr(0, 40))) continue;
    path.push_back(line.substr(0, 40));
    if (subjects) subjects->push_back(line.size() > 41 ? line.substr(41) : "");
  }
  // The path must start right after good: a good commit off the first-parent line (a branch merged in) would
  // silently make its fork point the good end.
  SyncResult first = path.empty() ? SyncResult{} : git({"--git-dir=" + cfg_.mirror, "rev-parse", path.front() + "^1"}, 60);
  if (path.empty() || path.back() != bad || first.output.substr(0, first.output.find('\n')) != good)
    return {SourceError::BadCommit, "good " + good + " is not on the first-parent line of bad " + bad};
  return {};
}

SourceResult GitMirror::merge_base(const std::string& sha, const std::string& main_ref, bool test_merge, std::string& base) {
  base.clear();
  if (!is_full_sha(sha)) return {SourceError::BadCommit, "sha '" + sha + "' is not a full commit id (40 hex digits)"};
  MirrorLock lock(cfg_.mirror + ".lock", cfg_.lock_timeout_seconds);
  if (!lock.locked()) return {SourceError::Busy, lock.error()};
  if (SourceResult r = ensure_commit(sha); !r.ok()) return r;
  SyncResult parents = git({"--git-dir=" + cfg_.mirror, "rev-list", "--parents", "-n", "1", sha}, 60);
  std::istringstream in(parents.output);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (test_merge && words.size() >= 3) {  // GitHub's test merge of a pull request into its base: its first parent is the base
    base = words[1];
    return {};
  }
  // A pull request's head: where it left the main branch, as the repository has it now.
  // Into a ref of our own (a branch of the mirror may be a worktree's).
  const std::string ours = "refs/pto-runner/main";
  SyncResult fetch = git({"--git-dir=" + cfg_.mirror, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", cfg_.repo, "+" + main_ref + ":" + ours},
                         cfg_.fetch_timeout_seconds);
  if (!fetch.outcome.ok()) return {SourceError::Unreachable, "cannot fetch " + main_ref + " from " + cfg_.repo + ": " + last_lines(fetch.output)};
  SyncResult mb = git({"--git-dir=" + cfg_.mirror, "merge-base", sha, ours}, 60);
  std::string line = mb.output.substr(0, mb.output.find('\n'));
  if (!mb.outcome.ok() || !is_full_sha(line)) return {SourceError::BadCommit, sha + " has no merge base with " + main_ref};
  base = line;
  return {};
}

SourceResult GitMirror::update_submodules(const std::string& sha, const std::string& dir, const std::string& base, int depth) {
  if (!fs::exists(fs::path(dir) / ".gitmodules")) return {};
  if (depth >= 8) return {SourceError::BadCommit, "commit " + sha + ": submodules nest deeper than 8 levels"};
  const std::vector<std::string> allowed = cfg_.submodule_urls ? *cfg_.submodule_urls : default_submodule_urls(cfg_.repo);
  bool local_allowed = false;
  for (const auto& a : allowed) local_allowed |= is_local_url(a);
  // One level at a time, each URL resolved and checked before git sees it: a nested .gitmodules is the
  // commit's (or a submodule's) word too.
  SyncResult list = git({"-C", dir, "config", "-f", ".gitmodules", "--get-regexp", "^submodule\\..*\\.url$"}, 60);
  std::istringstream lines(list.output);
  std::vector<std::pair<std::string, std::string>> subs;  // name, resolved URL
  for (std::string line; std::getline(lines, line);) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string key = line.substr(0, space), url = line.substr(space + 1);
    const std::string name = key.substr(10, key.size() - 10 - 4);  // submodule.NAME.url
    const std::string resolved = resolve_submodule_url(base, url);
    if (auto why = refused_submodule_url(resolved, allowed))
      return {SourceError::BadCommit, "commit " + sha + ": submodule '" + name + "' names " + url +
                                          (resolved != url ? " (" + resolved + ")" : "") + ", which is refused: " + *why};
    subs.emplace_back(name, resolved);
  }
  if (subs.empty()) return {};
  // The checked URLs are the ones git uses (a relative one would otherwise resolve against the worktree).
  SyncResult init = git({"-C", dir, "submodule", "init", "--quiet"}, 60);
  if (!init.outcome.ok()) return {SourceError::Failed, "cannot read the submodules of " + sha + ": " + last_lines(init.output)};
  for (const auto& [name, url] : subs) git({"-C", dir, "config", "submodule." + name + ".url", url}, 60);
  SyncResult sub = git({"-c", std::string("protocol.file.allow=") + (local_allowed ? "always" : "never"), "-C", dir, "submodule", "update",
                        "--quiet"},
                       cfg_.fetch_timeout_seconds);
  if (!sub.outcome.ok()) return {SourceError::Unreachable, "cannot fetch the submodules of " + sha + ": " + last_lines(sub.output)};
  for (const auto& [name, url] : subs) {
    SyncResult path = git({"-C", dir, "config", "-f", ".gitmodules", "submodule." + name + ".path"}, 60);
    std::string p = path.output;
    while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
    if (p.empty()) continue;
    if (SourceResult r = update_submodules(sha, (fs::path(dir) / p).string(), url, depth + 1); !r.ok()) return r;
  }
  return {};
}

void GitMirror::remove(const std::string& dir) {
  MirrorLock lock(cfg_.mirror + ".lock", cfg_.lock_timeout_seconds);
  std::error_code ec;
  if (!lock.locked()) {
    // Another fetch holds the mirror: no git in it now. The files go; the mirror forgets the worktree at the
    // next removal's `worktree prune`.
    fs::remove_all(dir, ec);
    return;
  }
  git({"--git-dir=" + cfg_.mirror, "worktree", "remove", "--force", "--force", dir}, 300);
  fs::remove_all(dir, ec);
  git({"--git-dir=" + cfg_.mirror, "worktree", "prune"}, 300);
}

}  // namespace pto
