#include "store/state_dir_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/lock_file.h"

namespace pto {

namespace {
std::string read_pid(int fd) {
  char buf[32] = {0};
  ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  pid = pid.substr(0, pid.find('\n'));
  return pid.empty() ? "unknown" : pid;
}
}  // namespace

int lock_state_dir(const std::string& state_dir, std::string& holder, std::string& error) {
  const std::string path = state_dir + "/daemon.lock";
  int fd = open_private_lock_file(path, "the state dir's lock", error);
  if (fd < 0) return -1;
  // A daemon killed a moment ago may leave its lock with a child it was starting: between vfork and exec the
  // child holds a copy of every descriptor, the lock's too, for as long as the kernel takes to move it into its
  // cgroup and exec it (tens of ms on a busy host). When the pid in the lock file is gone, that is all it can
  // be: wait for it (at most 5 s). A live holder is another daemon: refused at once.
  for (int tries = 0; ::flock(fd, LOCK_EX | LOCK_NB) != 0; ++tries) {
    holder = read_pid(fd);
    char* end = nullptr;
    const long pid = std::strtol(holder.c_str(), &end, 10);
    const bool gone = pid > 0 && end && *end == '\0' && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    if (!gone || tries >= 100) {
      ::close(fd);
      return -1;
    }
    ::usleep(50 * 1000);
  }
  std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  return fd;
}

std::string state_dir_holder(const std::string& state_dir) {
  int fd = ::open((state_dir + "/daemon.lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) holder = read_pid(fd);
  ::close(fd);
  return holder;
}

}  // namespace pto
