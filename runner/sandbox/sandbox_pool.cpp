#include "sandbox/sandbox_pool.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "exec/card_access.h"
#include "exec/run_sync.h"
#include "sandbox/run_tree.h"
#include "sandbox/user_leftovers.h"
#include "util/lock_file.h"
#include "util/process_env.h"

namespace fs = std::filesystem;

namespace pto {

SandboxPool::~SandboxPool() {
  // Whatever is still lent (a run that never started, a host stopping) goes back as at a run's end, swept
  // here even when a sweep was handed out (a stopping host's worker may not have run it).
  swept_apart_.clear();
  while (!lent_.empty()) give_back(lent_.begin()->first);
  for (const auto& [i, fd] : locks_) ::close(fd);
}

SandboxPool::SandboxPool(const SandboxConfig& cfg, std::vector<std::string> shared_files, std::vector<std::string> card_files,
                         std::string lock_dir)
    : lock_dir_(std::move(lock_dir)), shared_files_(std::move(shared_files)), card_files_(std::move(card_files)) {
  if (!cfg.enabled) {
    why_not_ = "sandbox: off in runner.yml";
    return;
  }
  if (::geteuid() != 0) {
    why_not_ = "the daemon is not root (uid " + std::to_string(::geteuid()) + "): it cannot run steps as other users";
    return;
  }
  std::vector<gid_t> extra;
  for (const auto& g : cfg.groups) {
    const group* gr = ::getgrnam(g.c_str());
    if (!gr) {
      why_not_ = "sandbox.groups: no group " + g + " on this host";
      return;
    }
    extra.push_back(gr->gr_gid);
  }
  std::vector<std::string> missing;
  for (int i = 0; i < cfg.count; ++i) {
    const std::string name = cfg.user(i);
    const passwd* pw = ::getpwnam(name.c_str());
    if (!pw) {
      missing.push_back(name);
      continue;
    }
    if (pw->pw_uid == 0 || pw->pw_uid == ::geteuid()) {
      why_not_ = "sandbox user " + name + " has uid " + std::to_string(pw->pw_uid) + ": a sandbox user must not be root or the daemon";
      return;
    }
    users_.push_back({name, pw->pw_uid, pw->pw_gid, extra});
  }
  if (!missing.empty()) {
    why_not_ = std::to_string(missing.size()) + " of the sandbox users " + cfg.user(0) + " .. " + cfg.user(cfg.count - 1) +
               " do not exist (pto-runner sandbox setup makes them)";
    users_.clear();
    return;
  }
  dirs_found_ = std::async(std::launch::async, [] { world_writable_dirs(); });
}

bool SandboxPool::lend_index(const std::string& run, std::size_t i) {
  // Lent by another pto-runner on this host (a foreground run beside the daemon): not this one.
  std::string error;
  int fd = open_private_lock_file(lock_dir_ + "/sandbox-" + users_[i].name + ".lock", "sandbox user lock", error);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (fd >= 0) ::close(fd);
    return false;
  }
  locks_[i] = fd;
  lent_[run] = i;
  revoke_file_access(card_files_, users_[i].uid);  // what a daemon killed mid-step left
  grant_file_access(shared_files_, users_[i].uid);
  return true;
}

std::optional<RunAs> SandboxPool::lend(const std::string& run) {
  if (!active()) return std::nullopt;
  if (auto it = lent_.find(run); it != lent_.end()) return users_[it->second];
  std::vector<bool> taken(users_.size(), false);
  for (const auto& [r, i] : lent_) taken[i] = true;
  for (std::size_t i = 0; i < users_.size(); ++i)
    if (!taken[i] && lend_index(run, i)) return users_[i];
  return std::nullopt;
}

std::optional<RunAs> SandboxPool::lend_again(const std::string& run, const std::string& name) {
  if (!active()) return std::nullopt;
  if (auto it = lent_.find(run); it != lent_.end()) return users_[it->second].name == name ? std::optional<RunAs>(users_[it->second]) : std::nullopt;
  for (std::size_t i = 0; i < users_.size(); ++i) {
    if (users_[i].name != name) continue;
    for (const auto& [r, lent] : lent_)
      if (lent == i) return std::nullopt;
    if (lend_index(run, i)) return users_[i];
  }
  return std::nullopt;
}

std::string SandboxPool::give_back(const std::string& run) {
  const bool swept = swept_apart_.erase(run) > 0;
  auto it = lent_.find(run);
  if (it == lent_.end()) return "";
  const std::size_t index = it->second;
  const RunAs& u = users_[index];
  lent_.erase(it);
  revoke_file_access(shared_files_, u.uid);
  revoke_file_access(card_files_, u.uid);
  const std::string left = swept ? "" : sweep_leftovers_of(u.uid).text(u.name);
  if (auto l = locks_.find(index); l != locks_.end()) {  // only now may another pto-runner lend it
    ::close(l->second);
    locks_.erase(l);
  }
  return left;
}

std::function<std::string()> SandboxPool::leftovers_sweep(const std::string& run) {
  auto it = lent_.find(run);
  if (it == lent_.end()) return nullptr;
  swept_apart_.insert(run);
  // The user stays lent (to `run` alone) until give_back: nothing else runs as it while the sweep runs.
  return [uid = users_[it->second].uid, name = users_[it->second].name] { return sweep_leftovers_of(uid).text(name); };
}

std::size_t SandboxPool::free_count() const { return users_.size() - lent_.size(); }

const RunAs* SandboxPool::of(const std::string& run) const {
  auto it = lent_.find(run);
  return it == lent_.end() ? nullptr : &users_[it->second];
}

std::vector<std::string> setup_sandbox_users(const SandboxConfig& cfg, const std::string& cache_group, std::string& error) {
  std::vector<std::string> said;
  if (::geteuid() != 0) {
    error = "sandbox setup makes users: run it as root";
    return said;
  }
  if (!cache_group.empty() && !::getgrnam(cache_group.c_str())) {
    SyncResult r = run_sync({"groupadd", "--system", cache_group}, environment_list(), 30, "/dev/null");
    if (!r.outcome.ok() && !::getgrnam(cache_group.c_str())) {  // made meanwhile by another setup: there
      error = "groupadd " + cache_group + " failed: " + r.output.substr(0, 300);
      return said;
    }
    said.push_back("made group " + cache_group + " (the caches' protected tier)");
  }
  std::string groups;
  for (const auto& g : cfg.groups) groups += (groups.empty() ? "" : ",") + g;
  for (int i = 0; i < cfg.count; ++i) {
    const std::string name = cfg.user(i);
    if (::getpwnam(name.c_str())) {
      if (!groups.empty()) run_sync({"usermod", "-a", "-G", groups, name}, environment_list(), 30, "/dev/null");
      continue;
    }
    std::vector<std::string> argv = {"useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                                     "--shell", "/usr/sbin/nologin", "--comment", "pto-runner sandbox user"};
    if (!groups.empty()) argv.insert(argv.end(), {"--groups", groups});
    argv.push_back(name);
    SyncResult r = run_sync(argv, environment_list(), 30, "/dev/null");
    if (!r.outcome.ok()) {
      error = "useradd " + name + " failed: " + r.output.substr(0, 300);
      return said;
    }
    said.push_back("made " + name);
  }
  if (said.empty()) said.push_back("every sandbox user exists (" + cfg.user(0) + " .. " + cfg.user(cfg.count - 1) + ")");
  return said;
}

std::vector<std::string> remove_sandbox_users(const SandboxConfig& cfg, const std::string& cache_group, std::string& error) {
  std::vector<std::string> said;
  if (!cache_group.empty() && ::getgrnam(cache_group.c_str())) {
    SyncResult r = run_sync({"groupdel", cache_group}, environment_list(), 30, "/dev/null");
    if (!r.outcome.ok()) {
      error = "groupdel " + cache_group + " failed: " + r.output.substr(0, 300);
      return said;
    }
    said.push_back("removed group " + cache_group);
  }
  for (int i = 0; i < cfg.count; ++i) {
    const std::string name = cfg.user(i);
    if (!::getpwnam(name.c_str())) continue;
    SyncResult r = run_sync({"userdel", name}, environment_list(), 30, "/dev/null");
    if (!r.outcome.ok()) {
      error = "userdel " + name + " failed: " + r.output.substr(0, 300);
      return said;
    }
    said.push_back("removed " + name);
  }
  return said;
}

std::unique_ptr<SandboxPool> open_daemon_sandbox(const RunnerConfig& cfg, const std::string& state_dir, const std::string& steps_root,
                                                 std::string& error, std::string& unreachable) {
  // Steps run as sandbox users, each run's its own; they reach their run's tree through a state dir closed to
  // them otherwise. Without them, said loudly, here and in the status and on the page.
  auto sandbox = std::make_unique<SandboxPool>(cfg.sandbox, cfg.shared_files, cfg.all_card_files(), cfg.lock_dir);
  if (error = close_state_dir(state_dir); !error.empty()) return nullptr;
  if (!sandbox->active()) {
    spdlog::warn("NO SANDBOX: pull requests' steps run as the daemon's own user (uid {}) and can reach its token, journal "
                 "and every other run: {}",
                 ::geteuid(), sandbox->why());
    return sandbox;
  }
  // Without `source:` steps run in the definitions' own tree, which they then read as their user.
  std::vector<std::pair<std::string, std::string>> dirs = {{state_dir, "the state dir"}};
  if (!steps_root.empty()) dirs.push_back({steps_root, "the root where steps run"});
  if (unreachable = unreachable_by_users(dirs, "give another --state-dir or root"); !unreachable.empty()) return nullptr;
  spdlog::info("sandbox: {} users ({} .. {}); each run's steps run as its own", sandbox->size(), cfg.sandbox.user(0),
               cfg.sandbox.user(cfg.sandbox.count - 1));
  return sandbox;
}

}  // namespace pto
