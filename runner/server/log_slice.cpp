#include "server/log_slice.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pto {

namespace {

// Opens without blocking (a FIFO where a log should be is not waited on) and reads [offset, offset+n).
LogSlice read_at(const std::string& path, std::uint64_t offset, std::size_t n, bool from_end) {
  LogSlice s;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) s.missing = true;
    else s.error = std::string("cannot open the log: ") + std::strerror(errno);
    return s;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    s.error = "the log is not a regular file";
    return s;
  }
  s.size = static_cast<std::uint64_t>(st.st_size);
  if (from_end) offset = s.size > n ? s.size - n : 0;
  offset = std::min(offset, s.size);
  std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(n, s.size - offset));
  s.data.resize(want);
  std::size_t got = 0;
  while (got < want) {
    ssize_t r = ::pread(fd, s.data.data() + got, want - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  s.data.resize(got);
  s.start = offset;
  s.end = offset + got;
  return s;
}

}  // namespace

LogSlice read_log_range(const std::string& path, std::uint64_t offset, std::size_t max_bytes) {
  return read_at(path, offset, std::min(max_bytes, kMaxLogRead), false);
}

LogSlice read_log_tail(const std::string& path, std::size_t lines, std::size_t max_bytes) {
  LogSlice s = read_at(path, 0, std::min(max_bytes, kMaxLogRead), true);
  if (s.data.empty() || lines == 0) {
    if (lines == 0) s.data.clear(), s.start = s.end;
    return s;
  }
  // Walk back over `lines` line ends (a final newline ends the last line, it does not start a new one).
  std::size_t cut = s.data.size() - (s.data.back() == '\n' ? 1 : 0);
  std::size_t seen = 0;
  bool found = false;
  while (cut > 0) {
    std::size_t nl = s.data.rfind('\n', cut - 1);
    if (nl == std::string::npos) break;
    if (++seen == lines) {
      cut = nl + 1;
      found = true;
      break;
    }
    cut = nl;
  }
  if (found) {
    s.data.erase(0, cut);
    s.start += cut;
  } else if (s.start > 0) {
    // The window starts inside a line: drop that piece, or, when the window is one line's tail, keep it,
    // and say what is not shown. `start` stays the offset of the first byte of the file that is shown.
    std::size_t first_nl = s.data.find('\n');
    bool one_line = first_nl == std::string::npos || first_nl + 1 == s.data.size();
    std::size_t drop = one_line ? 0 : first_nl + 1;
    s.data.erase(0, drop);
    s.start += drop;
    s.data = "[pto-runner: " + std::to_string(s.start) +
             (one_line ? " earlier bytes of this line not shown]\n" : " earlier bytes not shown]\n") + s.data;
  }
  return s;
}

}  // namespace pto
