#include "sched/card_lock.h"

#include <cstdio>
#include <cstdlib>

#include <map>
#include <sstream>

#include <fstream>

#include <sys/sysmacros.h>

#include "util/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pto {

std::string CardLock::path_for(const std::string& dir, int card, const std::string& name) {
  std::string file = name;
  const std::string id = std::to_string(card);
  for (std::size_t p; (p = file.find("{id}")) != std::string::npos;) file.replace(p, 4, id);
  return dir + "/" + file;
}

// The holder line is a fixed-width record overwritten in place (padded with spaces): truncating and
// rewriting the file on every acquire and release freed and reallocated a disk block each time, which showed
// up as 8% of the runner's CPU per step (perf, bench/README.md).
constexpr std::size_t kHolderRecord = 256;

static void write_holder(int fd, std::string line) {
  if (line.size() > kHolderRecord - 1) line.resize(kHolderRecord - 1);
  line.resize(kHolderRecord - 1, ' ');
  line += '\n';
  ssize_t ignored = ::pwrite(fd, line.data(), line.size(), 0);
  (void)ignored;  // the holder line is informative; the flock is what excludes
}

/// "MAJOR:MINOR:INODE" as /proc/locks names a file.
static std::string lock_key(const struct stat& st) {
  char key[64];
  std::snprintf(key, sizeof key, "%02x:%02x:%lu", major(st.st_dev), minor(st.st_dev), static_cast<unsigned long>(st.st_ino));
  return key;
}

/// The flocks held now, from /proc/locks: "MAJOR:MINOR:INODE" -> the holder's pid as listed ("0" or "-1" for
/// a holder in another pid namespace). A waiter's line ("->") holds nothing.
static std::map<std::string, std::string> held_flocks() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/locks");
  // "1: FLOCK  ADVISORY  WRITE 2310 08:01:1234 0 EOF"; a waiter's line has "->" after the number.
  for (std::string line; std::getline(in, line);) {
    if (line.find("->") != std::string::npos) continue;
    std::istringstream w(line);
    std::string n, kind, mode, rw, pid, file;
    w >> n >> kind >> mode >> rw >> pid >> file;
    if (kind == "FLOCK") out.emplace(file, pid);
  }
  return out;
}

/// The pid holding a flock on the file open as `fd` ("" when none can be named): what on-call needs when the
/// holder wrote no line of its own (a detached incumbent task, a person's `flock FILE cmd`).
static std::string flock_pid(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "";
  const auto held = held_flocks();
  auto it = held.find(lock_key(st));
  return it != held.end() && std::atol(it->second.c_str()) > 0 ? it->second : "";
}

static std::string read_holder(int fd) {
  char buf[kHolderRecord + 1] = {0};
  ssize_t n = pread(fd, buf, kHolderRecord, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  if (!s.empty()) return s;
  const std::string pid = flock_pid(fd);
  return pid.empty() ? "another process" : "pid=" + pid + " (wrote no holder line)";
}


std::optional<CardLock> CardLock::try_acquire(const std::string& dir, int card, const std::string& label,
                                              std::string& holder, std::string& error, const std::string& name) {
  int fd = open_private_lock_file(path_for(dir, card, name), "card lock", error);
  if (fd < 0) return std::nullopt;
  const std::string path = path_for(dir, card, name);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) holder = read_holder(fd);
    else error = "cannot lock " + path + ": " + std::strerror(errno);
    ::close(fd);
    return std::nullopt;
  }
  // `pid=` first: the incumbent task-submit's readers (its --list) parse the holder's pid from it.
  write_holder(fd, "pid=" + std::to_string(getpid()) + " (" + label + ")");
  return CardLock(fd, card);
}

bool CardLock::held_elsewhere(const std::string& dir, int card, std::string& holder, const std::string& name) {
  int fd = ::open(path_for(dir, card, name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  bool held = false;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    held = errno == EWOULDBLOCK;
    if (held) holder = read_holder(fd);
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return held;
}

std::set<std::string> CardLock::flocked_files() {
  std::set<std::string> out;
  for (const auto& [file, pid] : held_flocks()) out.insert(file);
  return out;
}

bool CardLock::seen_held(const std::string& dir, int card, const std::string& name, const std::set<std::string>& flocked,
                         std::string& holder) {
  const std::string path = path_for(dir, card, name);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (!flocked.count(lock_key(st))) return false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  holder = fd >= 0 ? read_holder(fd) : "another process";
  if (fd >= 0) ::close(fd);
  return true;
}

CardLock& CardLock::operator=(CardLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);  // see ~CardLock
      ::close(fd_);
    }
    fd_ = o.fd_;
    card_ = o.card_;
    o.fd_ = -1;
  }
  return *this;
}

CardLock::~CardLock() {
  if (fd_ >= 0) {
    // Leave the file (others may have it open) but blank the holder line before the kernel drops the lock.
    write_holder(fd_, "");
    // Unlocked, not only closed: a copy of this descriptor may live on in the step supervisor (a lease's, until
    // it hears the lease ended), and the card must be free for the next grant at once.
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace pto
