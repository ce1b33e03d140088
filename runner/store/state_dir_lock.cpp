#include "store/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
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
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    holder = read_pid(fd);
    ::close(fd);
    return -1;
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
