#include "caches/cache_tiers.h"

#include <grp.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "util/owned_dir.h"
#include "util/regular_file.h"
#include "util/state_paths.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ? c : '-';
  return out.substr(0, 100);
}

/// Each entry under `dir` (not itself) passed to `each` with its lstat; links are entries, never followed.
template <typename F>
std::string walk(const std::string& dir, F each) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;  // gone meanwhile
    if (std::string e = each(it->path().string(), st); !e.empty()) return e;
  }
  return ec ? "cannot walk " + dir + ": " + ec.message() : "";
}

}  // namespace

CacheScope CacheScope::of(const std::string& ref, bool protected_ref) {
  if (protected_ref) return {true, "protected"};
  static const std::string pull = "refs/pull/";
  if (ref.rfind(pull, 0) == 0) {
    const std::string n = ref.substr(pull.size(), ref.find('/', pull.size()) - pull.size());
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) return {false, "pr-" + n};
  }
  if (ref.empty()) return {false, "local"};
  return {false, "ref-" + slug(ref.rfind("refs/heads/", 0) == 0 ? ref.substr(11) : ref)};
}

RunCaches::RunCaches(const CachesConfig& cfg, CacheScope scope, std::string run_dir, std::optional<gid_t> group,
                     std::string remote_credential)
    : cfg_(cfg), scope_(std::move(scope)), run_dir_(std::move(run_dir)), group_(group), remote_credential_(std::move(remote_credential)) {}

std::string RunCaches::protected_tier(const std::string& name) const { return cfg_.dir + "/" + name + "/protected"; }

std::string RunCaches::scope_tier(const std::string& name) const { return cfg_.dir + "/" + name + "/scopes/" + scope_.name; }

std::vector<std::pair<std::string, std::string>> RunCaches::step_env(const std::string& name, const std::string& var,
                                                                     const std::string& stats_log) const {
  if (!is_ccache(var)) return {{var, scope_.writes_protected ? protected_tier(name) : scope_tier(name)}};
  std::string remote = cfg_.remote_url;
  if (!remote.empty() && remote.back() != '/') remote += '/';
  if (!remote.empty()) remote += name + "/";
  // Paths under the run's directory (its worktree, its build trees in tmp/) hashed relative to it: another run
  // of the same tree, here or on another host, has other directories and the same results.
  std::vector<std::pair<std::string, std::string>> env = {{"CCACHE_STATSLOG", stats_log}, {"CCACHE_BASEDIR", run_dir_}};
  if (scope_.writes_protected) {
    // Its own CCACHE_DIR, the run's, holds only ccache's statistics and temporary files (and no ccache.conf an
    // earlier run could have planted): the results go to the tier.
    std::string storage = "file:" + protected_tier(name) + "|update-mtime=true";
    if (!remote.empty()) {
      const std::size_t at = remote.find("://") + 3;
      storage += " " + (remote_credential_.empty() ? remote : remote.substr(0, at) + remote_credential_ + "@" + remote.substr(at));
    }
    env.insert(env.end(), {{"CCACHE_DIR", run_ccache_dir(run_dir_, name)}, {"CCACHE_REMOTE_STORAGE", storage}, {"CCACHE_REMOTE_ONLY", "true"},
                           {"CCACHE_UMASK", "002"}});
  } else {
    std::string storage = "file:" + protected_tier(name) + "|read-only";
    if (!remote.empty()) storage += " " + remote + "|read-only";
    env.insert(env.end(), {{"CCACHE_DIR", scope_tier(name)}, {"CCACHE_REMOTE_STORAGE", storage}, {"CCACHE_NOREMOTE_ONLY", "1"},
                           {"CCACHE_UMASK", "077"}, {"CCACHE_MAXSIZE", std::to_string(cfg_.max_size >> 20) + "M"}});
  }
  return env;
}

std::string RunCaches::prepare(const std::map<std::string, std::string>& names, const RunAs* user) const {
  // The tiers' parents are the daemon's (root's on a host; a developer's own daemon keeps its user's).
  const uid_t me = ::geteuid();
  const gid_t mine = ::getegid();
  const uid_t uid = user ? user->uid : me;
  const gid_t gid = user ? user->gid : mine;
  if (std::string e = make_owned_dir(cfg_.dir, 0755, me, mine); !e.empty()) return e;
  for (const auto& [name, var] : names) {
    if (std::string e = make_owned_dir(cfg_.dir + "/" + name, 0755, me, mine); !e.empty()) return e;
    if (std::string e = make_owned_dir(cfg_.dir + "/" + name + "/scopes", 0711, me, mine); !e.empty()) return e;
    // Without a group (no sandbox: every step is the daemon's user's) the tier is the daemon's alone.
    if (std::string e = make_owned_dir(protected_tier(name), group_ ? 02775 : 0755, me, group_.value_or(mine)); !e.empty()) return e;
    if (scope_.writes_protected) continue;
    const std::string own = scope_tier(name);
    if (std::string e = make_owned_dir(own, 0700, uid, gid); !e.empty()) return e;
    ::utimensat(AT_FDCWD, own.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // used now: its age counts from here (cache_prune)
    if (!user) continue;  // no sandbox: every tier is the daemon's user's already
    // What an earlier run of the scope left is this run's user's now (a later run may have another user).
    std::string e = walk(own, [&](const std::string& path, const struct stat& st) -> std::string {
      if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
        if (::unlink(path.c_str()) != 0) return "cannot remove the hard link " + path + ": " + std::strerror(errno);
        return "";
      }
      if ((st.st_uid != uid || st.st_gid != gid) && ::lchown(path.c_str(), uid, gid) != 0)
        return "cannot chown " + path + ": " + std::strerror(errno);
      return "";
    });
    if (!e.empty()) return e;
  }
  return "";
}

std::string RunCaches::reclaim(const std::map<std::string, std::string>& names, uid_t uid) const {
  if (!scope_.writes_protected || uid == 0) return "";
  for (const auto& [name, var] : names) {
    const std::string tier = protected_tier(name);
    std::string e = walk(tier, [&](const std::string& path, const struct stat& st) -> std::string {
      if (st.st_uid != uid) return "";
      if (::lchown(path.c_str(), 0, group_.value_or(0)) != 0) return "cannot chown " + path + ": " + std::strerror(errno);
      if (S_ISLNK(st.st_mode)) return "";
      // Group-writable for the next protected run's user; a directory keeps the group for what is made in it.
      const mode_t mode = (st.st_mode & 0777 & ~S_IWOTH) | S_IWGRP | S_IRGRP | (S_ISDIR(st.st_mode) ? S_ISGID | S_IXGRP : 0);
      if (::chmod(path.c_str(), mode) != 0) return "cannot chmod " + path + ": " + std::strerror(errno);
      return "";
    });
    if (!e.empty()) return e;
  }
  return "";
}

std::shared_ptr<const RunCaches> caches_for_run(const RunnerConfig& cfg, const std::string& ref, const std::string& run_dir, bool sandboxed) {
  CacheScope scope = CacheScope::of(ref, cfg.protected_ref(ref));
  std::optional<gid_t> group;
  if (sandboxed) {
    if (const struct group* g = ::getgrnam(cfg.caches.group.c_str())) group = g->gr_gid;
    else if (scope.writes_protected) {
      spdlog::warn("caches: group {} does not exist (pto-runner sandbox setup makes it): this run of {} writes a tier of its own, "
                   "not the protected one",
                   cfg.caches.group, ref);
      scope = CacheScope::of(ref, false);
    }
  }
  std::string credential;
  if (scope.writes_protected && !cfg.caches.remote_url.empty()) {
    std::string text, error;
    if (!read_regular_file(cfg.caches.remote_credential_file, 4096, text, error))
      spdlog::error("caches.remote: {}: this run does not write the remote", error);
    else
      credential = text.substr(0, text.find_first_of("\r\n"));
  }
  return std::make_shared<RunCaches>(cfg.caches, scope, run_dir, group, credential);
}

}  // namespace pto
