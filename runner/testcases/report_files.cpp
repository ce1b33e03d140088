#include "testcases/report_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

namespace pto {

namespace {

constexpr int kMaxDepth = 16;
constexpr std::size_t kMaxEntries = 200000;  // directory entries looked at, in all

std::vector<std::string> split_pattern(const std::string& pattern) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : pattern) {
    if (c == '/') {
      if (!cur.empty() && cur != ".") parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty() && cur != ".") parts.push_back(cur);
  return parts;
}

bool has_wildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

struct Walk {
  std::size_t max_bytes, max_files, max_total;
  std::vector<std::string> parts;
  CollectedReports out;
  std::set<std::string> seen;
  std::size_t entries = 0;
  std::size_t total = 0;  // bytes of the reports found so far

  bool failed() const { return !out.error.empty(); }

  std::string kind_of(mode_t m) {
    return S_ISLNK(m) ? "a symbolic link" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISDIR(m) ? "a directory" : "not a regular file";
  }

  void read_file(int dir, const std::string& name, const std::string& shown) {
    if (seen.count(shown)) return;
    seen.insert(shown);
    if (out.files.size() >= max_files) {
      out.error = "more than " + std::to_string(max_files) + " report files match (" + shown + " and more)";
      return;
    }
    int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      out.error = errno == ELOOP ? shown + " is a symbolic link: reports are read without following links"
                                 : shown + " cannot be opened: " + std::strerror(errno);
      return;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      out.error = shown + " is " + kind_of(st.st_mode) + ", not a report file";
      ::close(fd);
      return;
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size > max_bytes) {
      out.error = shown + " holds " + std::to_string(st.st_size) + " bytes; a report may hold at most " + std::to_string(max_bytes);
      ::close(fd);
      return;
    }
    total += size;
    if (total > max_total) {
      out.error = "the reports hold more than " + std::to_string(max_total) + " bytes in all (" + shown +
                  " passes it; runner.yml tests.max-report-bytes)";
      ::close(fd);
      return;
    }
    out.files.emplace_back(shown, size, fd);  // read later, one at a time (read_report)
  }

  /// The entries of `dir` (not . and ..), with their kinds as lstat sees them.
  std::vector<std::pair<std::string, mode_t>> list(int dir, const std::string& shown) {
    std::vector<std::pair<std::string, mode_t>> names;
    int fd = ::dup(dir);
    DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
    if (!d) {
      if (fd >= 0) ::close(fd);
      return names;
    }
    while (dirent* e = ::readdir(d)) {
      if (++entries > kMaxEntries) {
        out.error = "more than " + std::to_string(kMaxEntries) + " directory entries searched for reports (under " + shown + ")";
        break;
      }
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      struct stat st {};
      if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      names.emplace_back(n, st.st_mode);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  void descend(int dir, const std::string& name, const std::string& shown, std::size_t idx, int depth) {
    int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      if (errno == ELOOP || errno == ENOTDIR) {
        struct stat st {};
        if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
          out.error = shown + " is a symbolic link: reports are read without following links";
      }
      return;  // not there: nothing matches below it
    }
    walk(sub, shown, idx, depth + 1);
    ::close(sub);
  }

  void walk(int dir, const std::string& prefix, std::size_t idx, int depth) {
    if (failed() || idx >= parts.size() || depth > kMaxDepth) return;
    const std::string& part = parts[idx];
    const bool last = idx + 1 == parts.size();
    auto shown = [&](const std::string& n) { return prefix.empty() ? n : prefix + "/" + n; };
    if (part == "**") {
      walk(dir, prefix, idx + 1, depth);  // none
      for (const auto& [n, mode] : list(dir, prefix)) {
        if (failed()) return;
        if (S_ISDIR(mode)) descend(dir, n, shown(n), idx, depth);
      }
      return;
    }
    if (!has_wildcard(part)) {
      if (last) {
        struct stat st {};
        if (::fstatat(dir, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) read_file(dir, part, shown(part));
      } else {
        descend(dir, part, shown(part), idx + 1, depth);
      }
      return;
    }
    for (const auto& [n, mode] : list(dir, prefix)) {
      if (failed()) return;
      if (::fnmatch(part.c_str(), n.c_str(), FNM_PERIOD) != 0) continue;
      if (last) {
        if (!S_ISDIR(mode)) read_file(dir, n, shown(n));
      } else if (S_ISDIR(mode) || S_ISLNK(mode)) {
        descend(dir, n, shown(n), idx + 1, depth);
      }
    }
  }
};

}  // namespace

CollectedReports collect_reports(const std::string& base, const std::string& pattern, std::size_t max_bytes, std::size_t max_files,
                                 std::size_t max_total_bytes) {
  Walk w{max_bytes, max_files, max_total_bytes, split_pattern(pattern), {}, {}, 0, 0};
  if (w.parts.empty() || pattern.front() == '/') {
    w.out.error = "the report path '" + pattern + "' must be relative to the step's directory";
    return std::move(w.out);
  }
  for (const auto& p : w.parts)
    if (p == "..") {
      w.out.error = "the report path '" + pattern + "' may not leave the step's directory (..)";
      return std::move(w.out);
    }
  int dir = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return std::move(w.out);  // nothing written there: no reports
  w.walk(dir, "", 0, 0);
  ::close(dir);
  if (w.failed()) w.out.files.clear();  // refused whole: nothing of it is read
  std::sort(w.out.files.begin(), w.out.files.end(), [](const FoundReport& a, const FoundReport& b) { return a.path < b.path; });
  return std::move(w.out);
}

FoundReport& FoundReport::operator=(FoundReport&& o) noexcept {
  if (this != &o) {
    if (fd >= 0) ::close(fd);
    path = std::move(o.path);
    size = o.size;
    fd = std::exchange(o.fd, -1);
  }
  return *this;
}

FoundReport::~FoundReport() {
  if (fd >= 0) ::close(fd);
}

ReportFile read_report(FoundReport& f) {
  ReportFile out{f.path, std::string(f.size, '\0')};
  std::size_t got = 0;
  while (f.fd >= 0 && got < out.text.size()) {
    ssize_t n = ::read(f.fd, out.text.data() + got, out.text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.text.resize(got);
  if (f.fd >= 0) ::close(f.fd);
  f.fd = -1;
  return out;
}

}  // namespace pto
