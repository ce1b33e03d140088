#pragma once
// Finding and reading a step's test reports. They are written by a pull request's code, so they are hostile
// input read by root: every path component below `base` is opened with O_NOFOLLOW (a link anywhere on the
// way, or as a report, is refused by name, never followed), a report must be a regular file of at most
// `max_bytes`, no more than `max_files` are read, and no more than `max_total_bytes` in all. Blocking, but
// bounded by those caps; run off the engine's thread where a daemon must go on answering.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <string>
#include <vector>

namespace pto {

struct ReportFile {
  std::string path;  // relative to the base, as shown in messages
  std::string text;
};

/// A report found and opened (without following links, a regular file within the caps), not read yet: the
/// reader takes them one at a time, so a step's reports are never in memory all at once.
struct FoundReport {
  std::string path;  // relative to the base, as shown in messages
  std::size_t size = 0;
  int fd = -1;
  FoundReport(std::string p, std::size_t n, int f) : path(std::move(p)), size(n), fd(f) {}
  FoundReport(FoundReport&& o) noexcept : path(std::move(o.path)), size(o.size), fd(std::exchange(o.fd, -1)) {}
  FoundReport& operator=(FoundReport&& o) noexcept;
  FoundReport(const FoundReport&) = delete;
  FoundReport& operator=(const FoundReport&) = delete;
  ~FoundReport();
};

struct CollectedReports {
  std::vector<FoundReport> files;  // sorted by path
  std::string error;               // the first refusal ("" none): the step's reports are then not trusted
};

/// Files beneath `base` matching `pattern`: '/'-separated components, each with `*`, `?` and `[...]`
/// (fnmatch), or `**` for any number of directories. `base` itself is trusted (pto-runner made or chose it).
/// Refused whole before anything is read: a file over `max_bytes`, more than `max_files`, or more than
/// `max_total_bytes` in all (runner.yml tests.max-report-bytes).
CollectedReports collect_reports(const std::string& base, const std::string& pattern, std::size_t max_bytes, std::size_t max_files,
                                 std::size_t max_total_bytes = SIZE_MAX);

/// One found report's text (at most the size it had when found), its descriptor closed.
ReportFile read_report(FoundReport& f);

}  // namespace pto
