#include "util/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pto {

bool read_regular_file(const std::string& path, std::size_t max_bytes, std::string& text, std::string& error) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    error = path + (errno == ENOENT ? " does not exist" : std::string(" cannot be opened: ") + std::strerror(errno));
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = path + " cannot be read: " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISREG(st.st_mode)  ? nullptr
                                            : "not a regular file";
  if (kind) {
    error = path + " is " + kind + ", not a file";
    ::close(fd);
    return false;
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    error = path + " holds " + std::to_string(st.st_size) + " bytes; the limit is " + std::to_string(max_bytes);
    ::close(fd);
    return false;
  }
  text.assign(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = path + " cannot be read: " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  ::close(fd);
  return true;
}

}  // namespace pto
