#include "store/case_history.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "store/side_table.h"
#include "store/sqlite_stmt.h"
#include "util/json_text.h"

namespace pto {

namespace {

// The schema, made by whoever opens first (the daemon's writer); readers only read it.
constexpr const char* kSchema[] = {
    "CREATE TABLE IF NOT EXISTS test_results(test TEXT NOT NULL, ref TEXT NOT NULL, run TEXT NOT NULL, step TEXT NOT NULL,"
    " sha TEXT NOT NULL, attempt INTEGER NOT NULL, result TEXT NOT NULL, cause TEXT, duration REAL NOT NULL, cards TEXT NOT NULL,"
    " message TEXT, at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS test_results_by_test ON test_results(test, at)",
    "CREATE INDEX IF NOT EXISTS test_results_by_time ON test_results(at)",
    "CREATE TABLE IF NOT EXISTS test_days(ref TEXT NOT NULL, day INTEGER NOT NULL, test TEXT NOT NULL, runs INTEGER NOT NULL,"
    " outcomes INTEGER NOT NULL, failed INTEGER NOT NULL, flaky INTEGER NOT NULL, flips INTEGER NOT NULL, muted INTEGER NOT NULL,"
    " duration_sum REAL NOT NULL, duration_max REAL NOT NULL, last_result TEXT NOT NULL, last_at REAL NOT NULL,"
    " PRIMARY KEY(ref, day, test)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS test_days_by_test ON test_days(test, day)",
    "CREATE INDEX IF NOT EXISTS test_days_flaky ON test_days(day, test) WHERE flaky > 0",
    "CREATE TABLE IF NOT EXISTS test_last(ref TEXT NOT NULL, test TEXT NOT NULL, outcome INTEGER NOT NULL, at REAL NOT NULL,"
    " PRIMARY KEY(ref, test)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS test_mutes(id TEXT PRIMARY KEY, reason TEXT NOT NULL, until TEXT NOT NULL, by TEXT NOT NULL,"
    " at TEXT NOT NULL)",
};

// An attempt's outcome for flips: 1 passed, 0 failed by itself, -1 nothing to say (skipped, the card's).
int outcome_of(const TestCase& c) {
  if (c.result == TestResult::Skipped || c.result == TestResult::Victim) return -1;
  if (c.result == TestResult::Passed) return 1;
  if (c.cause == FailureCause::Card || c.cause == FailureCause::Infra) return -1;
  return 0;  // failed, error, or a muted failure of its own
}

}  // namespace

std::unique_ptr<TestHistory> TestHistory::open(const std::string& path, std::string& error) {
  // A step's 750 rows land all over the by-test indexes of a year's history: a page cache that holds their
  // upper levels keeps a step's write from reading pages back (bench/bench_test_history).
  sqlite3* db = open_side_connection(path, "the test history", {std::begin(kSchema), std::end(kSchema)}, error, {"PRAGMA cache_size=-32768"});
  return db ? std::unique_ptr<TestHistory>(new TestHistory(db)) : nullptr;
}

TestHistory::~TestHistory() { sqlite3_close(db_); }

template <typename F>
bool TestHistory::write(F&& f) {
  return side_transaction(db_, error_, "", std::forward<F>(f));
}

bool TestHistory::record(const StepTests& st) {
  if (st.cases.empty()) return true;
  const std::vector<TestCase>& cases = st.cases;
  // Each test's attempts in order; the step's failure share decides whether its outcomes count.
  std::map<std::string, std::vector<const TestCase*>> by_test;
  std::vector<std::string> order;
  for (const TestCase& c : cases) {
    auto& list = by_test[c.id];
    if (list.empty()) order.push_back(c.id);
    list.push_back(&c);
  }
  for (auto& [id, list] : by_test)
    std::stable_sort(list.begin(), list.end(), [](const TestCase* a, const TestCase* b) { return a->attempt < b->attempt; });
  std::size_t first_failed = 0;
  for (const auto& [id, list] : by_test) first_failed += is_failure(list.front()->result);
  const bool counts = !(by_test.size() >= 10 && first_failed * 5 > by_test.size() * 4);
  const long long day = static_cast<long long>(std::floor(st.at / kDay));
  return write([&] {
    Stmt row(db_,
             "INSERT INTO test_results(test, ref, run, step, sha, attempt, result, cause, duration, cards, message, at)"
             " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    Stmt last(db_, "SELECT outcome FROM test_last WHERE ref = ? AND test = ?");
    Stmt set_last(db_, "INSERT INTO test_last(ref, test, outcome, at) VALUES(?, ?, ?, ?) ON CONFLICT(ref, test) DO UPDATE SET outcome = excluded.outcome, at = excluded.at");
    Stmt days(db_,
              "INSERT INTO test_days(ref, day, test, runs, outcomes, failed, flaky, flips, muted, duration_sum, duration_max, last_result, last_at)"
              " VALUES(?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(ref, day, test) DO UPDATE SET runs = runs + 1,"
              " outcomes = outcomes + excluded.outcomes, failed = failed + excluded.failed, flaky = flaky + excluded.flaky,"
              " flips = flips + excluded.flips, muted = muted + excluded.muted, duration_sum = duration_sum + excluded.duration_sum,"
              " duration_max = MAX(duration_max, excluded.duration_max), last_result = excluded.last_result, last_at = excluded.last_at");
    for (const TestCase& c : cases) {
      nlohmann::json cards = c.cards;
      row.reset()
          .bind(1, c.id)
          .bind(2, st.ref)
          .bind(3, st.run)
          .bind(4, st.step)
          .bind(5, st.sha)
          .bind(6, c.attempt)
          .bind(7, to_string(c.result))
          .bind(8, c.cause ? to_string(*c.cause) : std::string())
          .bind(9, c.duration)
          .bind(10, dump_json(cards))
          .bind(11, c.message.substr(0, std::min(c.message.find('\n'), std::size_t{300})))
          .bind(12, st.at);
      row.step();
    }
    for (const std::string& id : order) {
      const auto& list = by_test[id];
      const TestCase& fin = *list.back();
      int prev = -1, flips = 0, outcomes = 0;
      if (counts) {
        last.reset().bind(1, st.ref).bind(2, id);
        if (last.step()) prev = static_cast<int>(last.integer(0));
        for (const TestCase* c : list) {
          const int o = outcome_of(*c);
          if (o < 0) continue;
          ++outcomes;
          flips += prev >= 0 && prev != o;
          prev = o;
        }
        if (outcomes > 0) {
          set_last.reset().bind(1, st.ref).bind(2, id).bind(3, prev).bind(4, st.at);
          set_last.step();
        }
      }
      int failed = 0, muted = 0;
      for (const TestCase* c : list) {
        failed |= (is_failure(c->result) || c->result == TestResult::Muted) && c->cause == FailureCause::Code;
        muted |= c->result == TestResult::Muted;
      }
      failed |= fin.cause == FailureCause::Flaky;
      days.reset()
          .bind(1, st.ref)
          .bind(2, day)
          .bind(3, id)
          .bind(4, outcomes)
          .bind(5, failed)
          .bind(6, fin.cause == FailureCause::Flaky ? 1 : 0)
          .bind(7, flips)
          .bind(8, muted)
          .bind(9, fin.duration)
          .bind(10, fin.duration)
          .bind(11, to_string(fin.result))
          .bind(12, st.at);
      days.step();
    }
  });
}

bool TestHistory::prune(double before) {
  const long long day = static_cast<long long>(std::floor(before / kDay));
  // In batches, each its own transaction: a first prune of a long history (a lowered retention-days) must not
  // hold the writer for seconds, nor grow the WAL by the whole deletion at once.
  constexpr int kBatch = 20000;
  for (bool more = true; more;) {
    if (!write([&] {
          Stmt(db_, "DELETE FROM test_results WHERE rowid IN (SELECT rowid FROM test_results WHERE at < ? LIMIT ?)")
              .bind(1, before)
              .bind(2, kBatch)
              .step();
          more = sqlite3_changes(db_) == kBatch;
        }))
      return false;
  }
  return write([&] {
    Stmt(db_, "DELETE FROM test_days WHERE day < ?").bind(1, day).step();
    Stmt(db_, "DELETE FROM test_last WHERE at < ?").bind(1, before).step();
  });
}

bool TestHistory::save_mutes(const std::vector<TestMute>& mutes) {
  return write([&] {
    Stmt(db_, "DELETE FROM test_mutes").step();
    Stmt put(db_, "INSERT INTO test_mutes(id, reason, until, by, at) VALUES(?, ?, ?, ?, ?)");
    for (const TestMute& m : mutes) {
      put.reset().bind(1, m.id).bind(2, m.reason).bind(3, m.until).bind(4, m.by).bind(5, m.at);
      put.step();
    }
  });
}

std::vector<TestMute> TestHistory::load_mutes() {
  std::vector<TestMute> out;
  try {
    Stmt s(db_, "SELECT id, reason, until, by, at FROM test_mutes ORDER BY at, id");
    while (s.step()) {
      TestMute m;
      m.id = s.text(0), m.reason = s.text(1), m.until = s.text(2), m.by = s.text(3), m.at = s.text(4);
      out.push_back(std::move(m));
    }
    error_.clear();
  } catch (const std::exception& e) {
    error_ = e.what();
  }
  return out;
}

int TestHistory::flaky_since(double since) {
  try {
    Stmt s(db_, "SELECT COUNT(DISTINCT test) FROM test_days WHERE flaky > 0 AND day >= ?");
    s.bind(1, static_cast<long long>(std::floor(since / kDay)));
    return s.step() ? static_cast<int>(s.integer(0)) : 0;
  } catch (const std::exception& e) {
    error_ = e.what();
    return 0;
  }
}

}  // namespace pto
