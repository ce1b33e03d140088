#pragma once
// TestHistory: every test case of every finished step with `tests:`, kept in the journal's SQLite file (its own
// tables and connection), and the API's mutes (SPEC "Test results": history, flip rate, mutes).
//
// Tables: test_results (one row per test per attempt: what GET /api/v1/tests/{id} lists; indexed by test and by
// time), test_days (per ref, day and test: runs, failures, flaky, flips, durations: what GET /api/v1/tests?ref=
// sums over the window, read by its primary key), test_last (each test's last outcome on each ref, for the next
// flip), test_mutes (the API's mutes, kept across restarts).
//
// A test's outcomes are its attempts' pass or fail with no card cause (victims, card breakers and skips say
// nothing about the test); a flip is an outcome unlike the one before it on the same ref, across runs and
// within one (failed, then passed on the rerun). A step whose failures are more than 80% of its tests (10 or
// more) is the host's bad day, not its tests' (as Trunk skips such uploads): its outcomes are not counted.
//
// Writes never throw (false, with the reason in error()). One thread at a time per TestHistory: the run
// history has one on its writer thread for steps' results (a step's 750 rows cost ~150 ms on a year's history,
// never the engine's time) and one on the engine thread for the mutes. Reads go through
// store/case_history_queries, on connections of their own.
#include <memory>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "testcases/case_result.h"

struct sqlite3;

namespace pto {

/// One finished step's test cases (every attempt), as history keeps them: a copy, written off the engine thread.
struct StepTests {
  std::string run, ref, sha, step;  // step: "job / step" as the pages name it
  double at = 0;                     // when the step ended (seconds since the epoch)
  std::vector<TestCase> cases;
};

class TestHistory {
 public:
  /// The journal at `path` (made by store/journal first): its test tables made when missing.
  static std::unique_ptr<TestHistory> open(const std::string& path, std::string& error);
  ~TestHistory();

  bool record(const StepTests& step);
  /// Drops rows older than `before` (seconds since the epoch): the retention of `tests.retention-days`.
  bool prune(double before);
  /// The API's mutes, replaced whole (they are few: tests.max-muted) / read back at start.
  bool save_mutes(const std::vector<TestMute>& mutes);
  std::vector<TestMute> load_mutes();
  /// Distinct tests flaky (failed, then passed on the same commit) on any ref since `since` (epoch seconds).
  int flaky_since(double since);
  const std::string& error() const { return error_; }

  static constexpr double kDay = 86400;

 private:
  explicit TestHistory(sqlite3* db) : db_(db) {}
  template <typename F>
  bool write(F&& f);
  sqlite3* db_;
  std::string error_;
};

}  // namespace pto
