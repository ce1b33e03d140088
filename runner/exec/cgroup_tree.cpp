#include "exec/cgroup_tree.h"

#include "exec/cgroup_files.h"


#include <algorithm>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace pto {

// cgroupfs files are small and read or written once per step end: plain system calls, no stream set-up.
std::string read_cgroup_file(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

bool write_cgroup_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

namespace {
// Cgroups cgroup.kill was written to: never handed out again (CgroupTree::recycle says why). Never destroyed:
// the tree's own destructor, at exit, kills what is left after function statics made later are gone.
std::mutex& killed_lock() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<std::string>& killed() {
  static auto* paths = new std::set<std::string>;
  return *paths;
}
}  // namespace

namespace {

constexpr std::size_t kMaxSpare = 64;  // more than any host's cards; the rest are removed

// The cgroup2 mount point, from /proc/self/mountinfo (field 5 is the mount point; the type follows " - ").
std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string f, mount;
    for (int i = 0; i < 5 && fields >> f; ++i) mount = f;
    return mount;
  }
  return "";
}

std::string own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

std::atomic<unsigned> g_next_child{0};
std::string g_disabled;

}  // namespace

CgroupTree& CgroupTree::instance() {
  static CgroupTree tree;
  return tree;
}

void CgroupTree::disable(const std::string& why) { g_disabled = why; }

CgroupTree::CgroupTree() {
  if (!g_disabled.empty()) {
    why_not_ = g_disabled;
    return;
  }
  std::string mount = cgroup2_mount();
  if (mount.empty()) {
    why_not_ = "no cgroup2 hierarchy is mounted";
    return;
  }
  std::string own = own_cgroup();
  fs::path parent = fs::path(mount) / fs::path(own).relative_path();
  if (own.empty() || !fs::exists(parent / "cgroup.procs")) {
    why_not_ = "this process's cgroup is not in the cgroup2 hierarchy at " + mount;
    return;
  }
  // Trees of daemons that died without cleaning up: their steps are ended and the cgroups removed.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("pto-runner-", 0) != 0 || !e.is_directory()) continue;
    pid_t pid = static_cast<pid_t>(std::atoi(name.c_str() + 11));
    if (pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM)) continue;
    for (const auto& c : fs::directory_iterator(e.path(), ec))
      if (c.is_directory()) {
        signal_all(c.path().string(), SIGKILL);
        remove(c.path().string());
      }
    ::rmdir(e.path().c_str());
  }
  fs::path root = parent / ("pto-runner-" + std::to_string(::getpid()));
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
    why_not_ = "cannot create " + root.string() + ": " + std::strerror(errno);
    return;
  }
  if (!fs::exists(root / "cgroup.kill")) {
    ::rmdir(root.c_str());
    why_not_ = "the kernel has no cgroup.kill (Linux 5.14+)";
    return;
  }
  root_ = root.string();
}

CgroupTree::~CgroupTree() {
  if (root_.empty()) return;
  std::error_code ec;
  for (const auto& c : fs::directory_iterator(root_, ec))
    if (c.is_directory()) {
      signal_all(c.path().string(), SIGKILL);
      remove(c.path().string());
    }
  ::rmdir(root_.c_str());
}

std::string CgroupTree::make_child(const std::string& parent, const char* kind) {
  if (root_.empty()) return "";
  const std::string& dir = parent.empty() ? root_ : parent;
  {
    std::lock_guard<std::mutex> g(spare_lock_);
    for (auto it = spare_.rbegin(); it != spare_.rend(); ++it) {
      if (it->compare(0, dir.size(), dir) != 0 || it->find('/', dir.size() + 1) != std::string::npos || (*it)[dir.size()] != '/') continue;
      std::string path = std::move(*it);
      spare_.erase(std::next(it).base());
      return path;
    }
  }
  // Another tree's names may be taken already (an earlier daemon's spare ones in a supervisor's tree).
  for (int tries = 0; tries < 1000; ++tries) {
    std::string path = dir + "/" + kind + "-" + std::to_string(++g_next_child);
    if (::mkdir(path.c_str(), 0755) == 0) return path;
    if (errno != EEXIST) break;
  }
  return "";
}

bool CgroupTree::add_process(const std::string& cgroup, pid_t pid) {
  return write_cgroup_file(cgroup + "/cgroup.procs", std::to_string(pid));
}

std::vector<pid_t> CgroupTree::processes(const std::string& cgroup) {
  std::vector<pid_t> out;
  std::istringstream in(read_cgroup_file(cgroup + "/cgroup.procs"));
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

bool CgroupTree::populated(const std::string& cgroup) {
  return cgroup_files::read(cgroup + "/cgroup.events").find("populated 1") != std::string::npos;
}

int CgroupTree::signal_all(const std::string& cgroup, int sig) {
  auto pids = processes(cgroup);
  if (sig == SIGKILL) {
    write_cgroup_file(cgroup + "/cgroup.kill", "1");
    std::lock_guard<std::mutex> g(killed_lock());  // (not instance(): its constructor kills leftovers)
    killed().insert(cgroup);
    return static_cast<int>(pids.size());
  }
  for (pid_t p : pids) ::kill(p, sig);
  return static_cast<int>(pids.size());
}

void CgroupTree::recycle(const std::string& cgroup, bool known_empty) {
  if (cgroup.empty()) return;
  bool was_killed;
  {
    std::lock_guard<std::mutex> g(killed_lock());
    was_killed = killed().erase(cgroup) > 0;
  }
  // Never one that was killed through cgroup.kill: this kernel (6.18) SIGKILLs every process cloned into it
  // afterwards (CLONE_INTO_CGROUP, as the spawner and task-submit start theirs: the cgroup's kill count is no
  // longer its parent's), tests/spawner_test.cpp. Made afresh instead; a kill is the rare end of a step.
  if (!was_killed && (known_empty || !populated(cgroup))) {
    std::lock_guard<std::mutex> g(spare_lock_);
    // Never twice: one path handed to two holders would let one's end kill the other's processes.
    if (std::find(spare_.begin(), spare_.end(), cgroup) != spare_.end()) return;
    if (spare_.size() < kMaxSpare) {
      spare_.push_back(cgroup);
      return;
    }
  }
  remove(cgroup);
}

void CgroupTree::remove(const std::string& cgroup) {
  if (cgroup.empty()) return;
  cgroup_files::forget(cgroup);
  ::rmdir(cgroup.c_str());  // fails (EBUSY) while processes remain; they are killed first
}

}  // namespace pto
