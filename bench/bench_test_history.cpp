// The test history's read (issue 32's figure): GET /api/v1/tests?ref= over a year of pypto's history. A journal
// is filled through TestHistory::record as the daemon fills it: 750 tests per system-tests step, 3 runs a day
// on main and 4.4 on pull requests (40 refs), 365 days: ~2 million rows in test_results. Then the query behind
// the GET (store/case_history_queries: ref_summary over tests.window-days, 14) and one test's history are timed,
// against the baseline of the same answer computed from the raw rows (GROUP BY over test_results, no sums
// table). p50 and p99 of N rounds of each, alternating.
//
// build/bench/bench_test_history /tmp/history.sqlite 200     (the file is filled once, then reused)
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "read_model/card_history.h"
#include "store/journal.h"
#include "store/sqlite_stmt.h"
#include "store/case_history.h"
#include "store/case_history_queries.h"

using namespace pto;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

constexpr int kTests = 750;
constexpr int kDays = 365;

std::string test_id(int i) { return "tests/st/runtime/test_op_" + std::to_string(i / 25) + ".py::test_kernel[case" + std::to_string(i % 25) + "]"; }

void fill(const std::string& path, double now) {
  std::string error;
  auto journal = Journal::open(path, error);
  auto h = TestHistory::open(path, error);
  if (!h) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<TestCase> cases(kTests);
  long rows = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int day = kDays; day > 0; --day)
    for (int run = 0; run < 7; ++run) {
      const bool on_main = run < 3 || (run == 6 && day % 5 < 2);  // 3 a day on main, ~4.4 on pull requests
      const std::string ref = on_main ? "refs/heads/main" : "refs/pull/" + std::to_string(1000 + (day * 7 + run) % 40) + "/merge";
      for (int i = 0; i < kTests; ++i) {
        TestCase& c = cases[i];
        c.id = test_id(i);
        c.attempt = 1;
        c.cards = {i % 8};
        c.duration = 0.2 + (i % 50) * 0.3 + u(rng);
        const bool flaky = i % 37 == 0 && u(rng) < 0.2, broken = i % 101 == 0 && u(rng) < 0.5;
        c.result = flaky || broken ? TestResult::Failed : TestResult::Passed;
        c.cause = c.result == TestResult::Failed ? std::optional<FailureCause>(FailureCause::Code) : std::nullopt;
        c.message = c.result == TestResult::Failed ? "AssertionError: mismatch at index 7" : "";
      }
      StepTests st{"run" + std::to_string(day) + "-" + std::to_string(run), ref, "0123456789abcdef0123456789abcdef01234567",
                   "system-tests / Run system tests", now - day * 86400.0 + run * 3000.0, cases};
      if (!h->record(st)) {
        std::fprintf(stderr, "record: %s\n", h->error().c_str());
        std::exit(1);
      }
      rows += kTests;
    }
  std::printf("filled %ld rows in %.1f s (%.2f ms per step of %d tests)\n", rows, seconds_since(t0), seconds_since(t0) * 1000 / (kDays * 7),
              kTests);
}

// The baseline: the same counts from the raw rows, as a store without the per-day sums would answer.
void raw_summary(const std::string& path, const std::string& ref, double since) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  {
    Stmt s(db, "SELECT test, COUNT(*), SUM(result IN ('failed', 'error')), AVG(duration), MAX(duration) FROM test_results"
               " WHERE ref = ? AND at >= ? GROUP BY test");
    s.bind(1, ref).bind(2, since);
    long n = 0;
    while (s.step()) ++n;
    if (n != kTests) std::fprintf(stderr, "baseline saw %ld tests\n", n);
  }
  sqlite3_close(db);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "/tmp/pto-bench-history.sqlite";
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 200;
  const double now = epoch_now();
  std::error_code ec;
  if (!fs::exists(path, ec)) fill(path, now);
  {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    Stmt s(db, "SELECT COUNT(*) FROM test_results");
    s.step();
    std::printf("test_results: %lld rows, %.0f MiB\n", s.integer(0), static_cast<double>(fs::file_size(path, ec)) / (1 << 20));
    sqlite3_close(db);
  }
  // The index on test_results(ref) a raw-row store would need: made once, for the baseline only.
  {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite_exec(db, "CREATE INDEX IF NOT EXISTS bench_raw_by_ref ON test_results(ref, at)");
    sqlite3_close(db);
  }
  // What the daemon's engine thread pays at a step's end once a year of history is there: 20 steps' writes.
  {
    std::string error;
    auto h = TestHistory::open(path, error);
    std::vector<TestCase> cases(kTests);
    for (int i = 0; i < kTests; ++i) {
      cases[i].id = test_id(i);
      cases[i].duration = 1;
      cases[i].cards = {i % 8};
    }
    std::vector<double> writes;
    for (int r = 0; r < 20; ++r) {
      StepTests st{"bench-write-" + std::to_string(r), "refs/pull/" + std::to_string(2000 + r) + "/merge", "f00d", "system-tests / Run",
                   now, cases};
      const auto t0 = std::chrono::steady_clock::now();
      h->record(st);
      writes.push_back(seconds_since(t0));
    }
    std::printf("a step's write (750 tests) on the full history: p50 %.1f ms, max %.1f ms\n", pct(writes, 0.5) * 1000,
                *std::max_element(writes.begin(), writes.end()) * 1000);
  }
  TestHistoryQueries q(path);
  const double since = now - 14 * 86400;
  std::vector<double> base, summary, one;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    raw_summary(path, "refs/heads/main", since);
    base.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    nlohmann::json j = q.ref_summary("refs/heads/main", since, 20);
    summary.push_back(seconds_since(t0));
    if (j.value("tests", 0) != kTests) std::fprintf(stderr, "ref_summary: %s\n", j.dump().substr(0, 300).c_str());
    t0 = std::chrono::steady_clock::now();
    nlohmann::json t = q.test_history(test_id(i % kTests), since, 200);
    one.push_back(seconds_since(t0));
    if (t["results"].size() != 200) std::fprintf(stderr, "test_history: %zu results\n", t["results"].size());
  }
  std::printf("%-44s %10s %10s\n", "", "p50 ms", "p99 ms");
  std::printf("%-44s %10.2f %10.2f\n", "baseline: GROUP BY over the raw rows", pct(base, 0.5) * 1000, pct(base, 0.99) * 1000);
  std::printf("%-44s %10.2f %10.2f\n", "GET /api/v1/tests?ref= (ref_summary)", pct(summary, 0.5) * 1000, pct(summary, 0.99) * 1000);
  std::printf("%-44s %10.2f %10.2f\n", "GET /api/v1/tests/{id} (test_history, 200)", pct(one, 0.5) * 1000, pct(one, 0.99) * 1000);
  std::printf("ratio ref_summary / baseline (p99): %.2fx\n", pct(summary, 0.99) / pct(base, 0.99));
  return 0;
}
