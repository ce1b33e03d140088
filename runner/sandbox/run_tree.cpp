#include "sandbox/run_tree.h"
#include "util/owned_dir.h"
#include "util/state_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace pto {

namespace {

std::string make_dir(const std::string& dir, mode_t mode, const RunAs* owner) {
  return owner ? make_owned_dir(dir, mode, owner->uid, owner->gid) : make_owned_dir(dir, mode);
}

/// Everything under `dir` (itself included) to `owner`, links themselves and never what they point at.
std::string chown_tree(const std::string& dir, const RunAs& owner) {
  if (::lchown(dir.c_str(), owner.uid, owner.gid) != 0) return "cannot chown " + dir + ": " + std::strerror(errno);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; !ec && it != end; it.increment(ec))
    if (::lchown(it->path().c_str(), owner.uid, owner.gid) != 0)
      return "cannot chown " + it->path().string() + ": " + std::strerror(errno);
  return ec ? "cannot walk " + dir + ": " + ec.message() : "";
}

const RunAs kRoot{"root", 0, 0, {}};

/// The worktree's own admin dir in the mirror (`gitdir: .../worktrees/NAME` in src/.git): git in the worktree
/// writes its index and HEAD there, and refuses a worktree whose admin dir is another user's.
std::string worktree_admin_dir(const std::string& src) {
  std::ifstream in(src + "/.git");
  std::string line;
  if (!std::getline(in, line) || line.rfind("gitdir: ", 0) != 0) return "";
  std::string dir = line.substr(8);
  return dir.find("/worktrees/") == std::string::npos ? "" : dir;
}

}  // namespace

std::string close_state_dir(const std::string& state_dir) {
  for (const std::string& d : {state_dir, runs_dir(state_dir)})
    if (std::string e = make_dir(d, 0711, nullptr); !e.empty()) return e;
  return "";
}

std::string prepare_run_tree(const std::string& run_dir, const RunAs* user) {
  if (std::string e = make_dir(run_dir, 0711, nullptr); !e.empty()) return e;
  if (std::string e = make_dir(run_logs(run_dir), 0700, nullptr); !e.empty()) return e;
  if (std::string e = make_dir(run_test_reports(run_dir), 0711, nullptr); !e.empty()) return e;
  for (const std::string& d : {run_files(run_dir), run_home(run_dir), run_temp(run_dir)})
    if (std::string e = make_dir(d, 0700, user); !e.empty()) return e;
  const std::string src = run_worktree(run_dir);
  struct stat st {};
  if (user && ::lstat(src.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    if (std::string e = chown_tree(src, *user); !e.empty()) return e;
    if (::chmod(src.c_str(), 0700) != 0) return "cannot chmod " + src + ": " + std::strerror(errno);
    if (std::string admin = worktree_admin_dir(src); !admin.empty()) {
      // Remembered where only root writes: at the end src/.git is the user's and could name any directory.
      std::ofstream(run_worktree_admin(run_dir)) << admin << "\n";
      if (std::string e = chown_tree(admin, *user); !e.empty()) return e;
    }
  }
  return "";
}

std::string reclaim_run_tree(const std::string& run_dir) {
  std::string problem;
  for (const std::string& d : {run_files(run_dir), run_home(run_dir), run_temp(run_dir), run_test_reports(run_dir)}) {
    std::error_code ec;
    fs::remove_all(d, ec);
    if (ec && problem.empty()) problem = "cannot remove " + d + ": " + ec.message();
  }
  const std::string src = run_worktree(run_dir);
  struct stat st {};
  if (::lstat(src.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::string admin;
    std::getline(std::ifstream(run_worktree_admin(run_dir)), admin);
    if (std::string e = chown_tree(src, kRoot); !e.empty() && problem.empty()) problem = e;
    if (!admin.empty())
      if (std::string e = chown_tree(admin, kRoot); !e.empty() && problem.empty()) problem = e;
  }
  return problem;
}

std::string unreachable_by_users(const std::vector<std::pair<std::string, std::string>>& dirs, const std::string& otherwise) {
  for (const auto& [path, what] : dirs)
    if (std::string closed = unsearchable_ancestor(path); !closed.empty())
      return "sandbox users cannot reach " + what + " " + path + ": " + closed + " is not searchable by others (chmod o+x it, or " +
             otherwise + ")";
  return "";
}

std::string unsearchable_ancestor(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  fs::path at;
  for (const auto& part : p) {
    at /= part;
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0) break;  // not made yet: made 0711 by us
    if (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)) return at.string();
  }
  return "";
}

}  // namespace pto
