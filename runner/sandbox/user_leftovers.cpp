#include "sandbox/user_leftovers.h"

#include <signal.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace pto {

namespace {

constexpr long kMqueueMagic = 0x19800202;  // MQUEUE_MAGIC

std::vector<pid_t> processes_of(uid_t uid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream in(e.path() / "status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("Uid:", 0) == 0) {
        std::istringstream ids(line.substr(4));
        uid_t real = 0, effective = 0, saved = 0;
        ids >> real >> effective >> saved;
        if (real == uid || effective == uid || saved == uid) out.push_back(std::stoi(name));
        break;
      }
  }
  return out;
}

/// The ids of /proc/sysvipc/KIND's objects owned or created by `uid` (the columns named by its header).
std::vector<int> sysv_ids_of(const char* kind, uid_t uid) {
  std::vector<int> out;
  std::ifstream in(std::string("/proc/sysvipc/") + kind);
  std::string header;
  if (!std::getline(in, header)) return out;
  std::vector<std::string> cols;
  std::istringstream h(header);
  for (std::string c; h >> c;) cols.push_back(c);
  auto col = [&](const std::string& name) { return static_cast<std::size_t>(std::find(cols.begin(), cols.end(), name) - cols.begin()); };
  const std::size_t id = 1, owner = col("uid"), creator = col("cuid");
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> v;
    std::istringstream l(line);
    for (std::string x; l >> x;) v.push_back(x);
    if (v.size() <= std::max(owner, creator)) continue;
    if (std::strtoul(v[owner].c_str(), nullptr, 10) == uid || std::strtoul(v[creator].c_str(), nullptr, 10) == uid)
      out.push_back(std::atoi(v[id].c_str()));
  }
  return out;
}

/// Removes the entries of `dir` that `uid` owns, and looks into the world-writable directories inside it.
int remove_owned_in(const fs::path& dir, uid_t uid, int depth) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    if (st.st_uid == uid) {
      std::error_code rm;
      fs::remove_all(e.path(), rm);
      if (!rm) ++n;
    } else if (S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH) && depth < 6) {
      n += remove_owned_in(e.path(), uid, depth + 1);
    }
  }
  return n;
}

/// POSIX message queues live in the mqueue filesystem: /dev/mqueue where it is mounted, else one mounted here
/// for the sweep, on a directory of root's alone.
int remove_mqueues_of(uid_t uid) {
  struct statfs fsinfo {};
  if (::statfs("/dev/mqueue", &fsinfo) == 0 && fsinfo.f_type == kMqueueMagic) return remove_owned_in("/dev/mqueue", uid, 5);
  char where[] = "/run/pto-runner-mqueue-XXXXXX";
  if (!::mkdtemp(where)) return 0;
  int n = 0;
  if (::mount("mqueue", where, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0) {
    n = remove_owned_in(where, uid, 5);
    ::umount2(where, MNT_DETACH);
  }
  ::rmdir(where);
  return n;
}

void find_world_writable(const fs::path& dir, int depth, std::set<std::string>& out) {
  if (depth > 3) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec)) {
    const std::string p = e.path().string();
    if (p == "/proc" || p == "/sys" || p.rfind("/run/pto-runner-mqueue-", 0) == 0) continue;
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (st.st_mode & S_IWOTH) {
      out.insert(p);  // remove_owned_in looks deeper from here
      continue;
    }
    find_world_writable(e.path(), depth + 1, out);
  }
}

}  // namespace

std::string Leftovers::text(const std::string& user) const {
  std::string said;
  if (processes) said = std::to_string(processes) + " process(es) of " + user + " killed";
  std::string removed;
  if (ipc) removed = std::to_string(ipc) + " IPC object(s)";
  if (files) removed += (removed.empty() ? "" : " and ") + std::to_string(files) + " file(s)";
  if (!removed.empty()) said += (said.empty() ? "" : ", ") + removed + " of " + user + " removed";
  return said;
}

int kill_processes_of(uid_t uid) {
  if (uid == 0) return 0;
  std::set<pid_t> seen;
  // A fork bomb forks while it is killed: go round until a pass finds nobody.
  for (int round = 0; round < 200; ++round) {
    std::vector<pid_t> left = processes_of(uid);
    if (left.empty()) break;
    for (pid_t p : left) {
      seen.insert(p);
      ::kill(p, SIGKILL);
    }
    ::usleep(10000);
  }
  return static_cast<int>(seen.size());
}

int remove_ipc_of(uid_t uid) {
  if (uid == 0) return 0;
  int n = 0;
  for (int id : sysv_ids_of("shm", uid)) n += ::shmctl(id, IPC_RMID, nullptr) == 0;
  for (int id : sysv_ids_of("sem", uid)) n += ::semctl(id, 0, IPC_RMID) == 0;
  for (int id : sysv_ids_of("msg", uid)) n += ::msgctl(id, IPC_RMID, nullptr) == 0;
  return n + remove_mqueues_of(uid);
}

const std::vector<std::string>& world_writable_dirs() {
  static const std::vector<std::string> dirs = [] {
    std::set<std::string> found = {"/tmp", "/var/tmp", "/dev/shm", "/run/lock"};
    find_world_writable("/", 1, found);
    // /dev/mqueue is swept with the IPC objects; a link (/var/lock) is its target's.
    found.erase("/dev/mqueue");
    std::vector<std::string> out;
    for (const auto& d : found) {
      struct stat st {};
      if (::lstat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(d);
    }
    return out;
  }();
  return dirs;
}

int remove_files_of(uid_t uid) {
  if (uid == 0) return 0;
  int n = 0;
  for (const auto& d : world_writable_dirs()) n += remove_owned_in(d, uid, 0);
  return n;
}

Leftovers sweep_leftovers_of(uid_t uid) {
  Leftovers l;
  if (uid == 0) return l;
  l.processes = kill_processes_of(uid);  // first: nothing of it makes more while the rest goes
  l.ipc = remove_ipc_of(uid);
  l.files = remove_files_of(uid);
  return l;
}

}  // namespace pto
