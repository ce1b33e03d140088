#include "engine/file_commands.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pto {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return lines;
}

}  // namespace

bool parse_name_value_file(const std::string& text, NameValues& out, std::string& error) {
  auto lines = lines_of(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty()) continue;
    std::size_t eq = line.find('='), heredoc = line.find("<<");
    // As GitHub's runner: `=` before any `<<` makes a one-line value; otherwise NAME<<DELIMITER.
    if (eq != std::string::npos && (heredoc == std::string::npos || eq < heredoc)) {
      if (eq == 0) {
        error = "line " + std::to_string(i + 1) + ": no name before '=': " + line.substr(0, 80);
        return false;
      }
      out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
      continue;
    }
    if (heredoc == std::string::npos || heredoc == 0 || heredoc + 2 == line.size()) {
      error = "line " + std::to_string(i + 1) + ": expected NAME=value or NAME<<DELIMITER, got: " + line.substr(0, 80);
      return false;
    }
    const std::string name = line.substr(0, heredoc), delimiter = line.substr(heredoc + 2);
    std::string value;
    bool closed = false;
    std::size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      if (lines[j] == delimiter) {
        closed = true;
        break;
      }
      value += (j == i + 1 ? "" : "\n") + lines[j];
    }
    if (!closed) {
      error = "line " + std::to_string(i + 1) + ": no line '" + delimiter + "' closes the value of " + name;
      return false;
    }
    out.emplace_back(name, value);
    i = j;
  }
  return true;
}

std::vector<std::string> parse_path_file(const std::string& text) {
  std::vector<std::string> out;
  for (auto& line : lines_of(text))
    if (!line.empty()) out.push_back(line);
  return out;
}

bool read_step_file(const std::string& path, uid_t owner, std::string& text, std::string& error, std::size_t max_bytes,
                    bool* found) {
  text.clear();
  // Without blocking, and only a regular file: the step may have replaced it with anything.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (found) *found = fd >= 0 || errno != ENOENT;
  if (fd < 0) {
    if (errno == ENOENT) return true;
    error = errno == ELOOP ? path + " is a symbolic link; it is not followed" : path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = path + " is not a regular file";
    return false;
  }
  if (st.st_uid != owner) {  // a hard link to someone else's file
    ::close(fd);
    error = path + " belongs to uid " + std::to_string(st.st_uid) + ", not to the step's user (uid " + std::to_string(owner) + ")";
    return false;
  }
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    error = path + " holds " + std::to_string(st.st_size) + " bytes; the limit is " + std::to_string(max_bytes);
    return false;
  }
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return true;
}

}  // namespace pto
