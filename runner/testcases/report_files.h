#pragma once
// Finding and reading a step's test reports. They are written by a pull request's code, so they are hostile
// input read by root: every path component below `base` is opened with O_NOFOLLOW (a link anywhere on the
// way, or as a report, is refused by name, never followed), a report must be a regular file of at most
// `max_bytes`, and no more than `max_files` are read. Blocking, but bounded by those caps.
#include <cstddef>
#include <string>
#include <vector>

namespace pto {

struct ReportFile {
  std::string path;  // relative to the base, as shown in messages
  std::string text;
};

struct CollectedReports {
  std::vector<ReportFile> files;  // sorted by path
  std::string error;              // the first refusal ("" none): the step's reports are then not trusted
};

/// Files beneath `base` matching `pattern`: '/'-separated components, each with `*`, `?` and `[...]`
/// (fnmatch), or `**` for any number of directories. `base` itself is trusted (pto-runner made or chose it).
CollectedReports collect_reports(const std::string& base, const std::string& pattern, std::size_t max_bytes, std::size_t max_files);

}  // namespace pto
