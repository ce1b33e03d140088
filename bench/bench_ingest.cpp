// Ingesting a step's test report (issue 32's figure): a JUnit report of N test cases as the pytest plugin
// writes it (a tenth of them failed with a message and captured output, a card fault among them), through
// what the engine does at a step's end (testcases/report_files: found and read without following links;
// testcases/junit_reader: parsed by pugixml into TestCase values; testcases/verdict: judged and summed),
// against the baseline of reading the same file and parsing it with pugixml and nothing else. Medians of
// alternating rounds; the peak RSS each adds is printed too (VmHWM after each, in a fresh process per side).
//
// build/bench/bench_ingest 10000 7
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <pugixml.hpp>

#include "testcases/junit_reader.h"
#include "testcases/report_files.h"
#include "testcases/verdict.h"

using namespace pto;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void write_report(const fs::path& path, int n) {
  std::ofstream out(path);
  out << "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites>\n<testsuite name=\"pytest\" pid=\"1\">\n";
  for (int i = 0; i < n; ++i) {
    const int card = i % 8;
    out << "<pto-started name=\"tests/st/runtime/test_ops.py::test_kernel[" << i << "]\"/>\n"
        << "<testcase classname=\"tests/st/runtime/test_ops.py\" name=\"test_kernel[" << i
        << "]\" file=\"tests/st/runtime/test_ops.py\" line=\"42\" time=\"0.25\"><properties><property name=\"pto.cards\" value=\""
        << card << "\"/></properties>";
    if (i % 10 == 3)
      out << "<failure message=\"AssertionError: mismatch at index " << i << "\">def test_kernel(case):\n&gt;  assert out == golden\nE  AssertionError\n"
          << std::string(800, 'x') << "</failure><system-out>" << (card == 2 ? "aclrtSynchronizeStream failed: 507018\n" : "running\n")
          << std::string(2000, 'y') << "</system-out>";
    out << "</testcase>\n";
  }
  out << "</testsuite>\n</testsuites>\n";
}

long hwm_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

double baseline(const fs::path& dir) {
  auto t0 = std::chrono::steady_clock::now();
  std::ifstream in(dir / "pytest-1-0.xml", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  pugi::xml_document doc;
  if (!doc.load_buffer(text.data(), text.size())) std::abort();
  std::size_t cases = 0;
  for (auto s : doc.child("testsuites").children("testsuite")) cases += std::distance(s.children("testcase").begin(), s.children("testcase").end());
  if (cases == 0) std::abort();
  return seconds_since(t0);
}

double ingest(const fs::path& dir, const HealthConfig& health) {
  auto t0 = std::chrono::steady_clock::now();
  CollectedReports found = collect_reports(dir.string(), "*.xml", 64u << 20, 1000, 256u << 20);
  if (!found.error.empty()) std::abort();
  std::vector<TestCase> cases;
  for (std::size_t i = 0; i < found.files.size(); ++i) {
    ParsedReport r = parse_junit(read_report(found.files[i]), static_cast<int>(i), true);
    if (!r.error.empty()) std::abort();
    for (auto& c : r.cases) cases.push_back(std::move(c));
  }
  AttemptTests judged = judge_attempt(cases, health, {0, 1, 2, 3, 4, 5, 6, 7}, {});
  TestsSummary s = summarize_tests(cases);
  if (judged.ran == 0 || s.ran == 0) std::abort();
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const char* side = argc > 3 ? argv[3] : "";
  const fs::path dir = fs::temp_directory_path() / ("pto-bench-ingest-" + std::to_string(n));
  fs::create_directories(dir);
  if (!fs::exists(dir / "pytest-1-0.xml")) write_report(dir / "pytest-1-0.xml", n);
  HealthConfig health;
  health.fault_patterns.push_back({"507018", std::make_shared<const std::regex>("507018"), FailureCause::Card, 0});
  // One side alone, for its peak RSS (called by this program for each side).
  if (std::string(side) == "rss-baseline" || std::string(side) == "rss-ingest") {
    const long before = hwm_kb();
    std::string(side) == "rss-baseline" ? baseline(dir) : ingest(dir, health);
    std::printf("%ld\n", hwm_kb() - before);
    return 0;
  }
  std::vector<double> base, ours;
  for (int r = 0; r < rounds; ++r) {
    base.push_back(baseline(dir));
    ours.push_back(ingest(dir, health));
  }
  std::sort(base.begin(), base.end());
  std::sort(ours.begin(), ours.end());
  const double b = base[base.size() / 2], o = ours[ours.size() / 2];
  auto rss = [&](const char* which) {
    std::string cmd = std::string("'") + argv[0] + "' " + std::to_string(n) + " 1 " + which;
    FILE* p = ::popen(cmd.c_str(), "r");
    long kb = -1;
    if (p && std::fscanf(p, "%ld", &kb) != 1) kb = -1;
    if (p) ::pclose(p);
    return kb;
  };
  std::printf("report: %d test cases, %.1f MiB\n", n, fs::file_size(dir / "pytest-1-0.xml") / 1048576.0);
  std::printf("baseline (read + pugixml parse): %.4f s   ingest (find, read, parse, judge, sum): %.4f s   ratio %.2fx (%d rounds, medians)\n",
              b, o, o / b, rounds);
  std::printf("peak RSS added: baseline %ld KiB, ingest %ld KiB\n", rss("rss-baseline"), rss("rss-ingest"));
  return 0;
}
