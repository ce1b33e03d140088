#include "util/lock_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pto {

int open_private_lock_file(const std::string& path, const std::string& what, std::string& error) {
  // Never through a link (one planted in the lock dir would make us write the holder line into its target),
  // only a regular file, readable by its owner only: whoever can open a lock file can flock it and hold it.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd < 0) {
    error = "cannot open " + what + " " + path + ": " + (errno == ELOOP ? std::string("it is a symbolic link") : std::strerror(errno));
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = what + " " + path + " is not a regular file";
    return -1;
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {  // planted by another user, who could hold it open
    ::close(fd);
    error = what + " " + path + " belongs to uid " + std::to_string(st.st_uid) + ", not to this daemon";
    return -1;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) && st.st_uid == ::geteuid()) ::fchmod(fd, 0600);  // one made before, open to others
  return fd;
}

}  // namespace pto
