#pragma once
// JUnit XML to test cases. Reports are hostile input: pugixml parses without DTDs or entity expansion (no
// billion laughs, no external entities); a report that does not parse is refused with its file, line and
// column. The cases of one report are one process's, in the order they ran (what victims are judged by).
//
// pto-runner's own pytest plugin (testcases/pto_runner_pytest.py) writes its reports as the tests end: one
// whose process died before the end is read up to its last complete test case, and the test it died in
// (its last <pto-started/> without a case) is an error.
#include <string>
#include <vector>

#include "testcases/report_files.h"
#include "testcases/case_result.h"

namespace pto {

struct ParsedReport {
  std::vector<TestCase> cases;
  std::string error;  // "FILE:LINE:COL: what is wrong" ("" parsed)
  bool complete = true;  // false: the process ended before its report was closed
};

/// `process` is stamped on every case; `from_plugin`: written by pto-runner's plugin (may be cut short).
ParsedReport parse_junit(const ReportFile& report, int process, bool from_plugin);

/// Where a step's reports are and how much of them is read (testcases/report_files' caps).
struct ReportQuery {
  std::string base, pattern;
  std::size_t max_bytes = 64u << 20;         // a file
  std::size_t max_files = 1000;
  std::size_t max_total_bytes = 256u << 20;  // all of them (runner.yml tests.max-report-bytes)
  /// Test cases in all (runner.yml tests.max-cases): every case is judged, kept and shown on the daemon's
  /// one thread, so a report of millions of tiny cases is refused rather than read.
  std::size_t max_cases = 10000;
  /// What failed tests printed, kept in all (each at most 64 KiB; past this only the last 4 KiB of each):
  /// every copy the daemon makes of a step's cases carries it.
  std::size_t max_output_bytes = 16u << 20;
  bool from_plugin = false;
};

struct ParsedReports {
  std::vector<TestCase> cases;  // the reports' in path order, each report's in the order its tests ran
  std::string error;            // the first refusal ("" none): then the cases are not to be trusted
};

/// Every report `q` finds, read and parsed one at a time (never all of them in memory at once). Blocking file
/// reads and parsing: the daemon runs it off its engine's thread.
ParsedReports read_junit_reports(const ReportQuery& q);

}  // namespace pto
