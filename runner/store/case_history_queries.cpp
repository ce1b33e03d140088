#include "store/case_history_queries.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "store/sqlite_stmt.h"
#include "store/case_history.h"
#include "util/iso_time.h"

namespace pto {

namespace {

struct Db {
  sqlite3* db = nullptr;
  ~Db() { sqlite3_close(db); }
};

void open_readonly(Db& d, const std::string& path) {
  if (sqlite3_open_v2(path.c_str(), &d.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
    throw std::runtime_error("cannot read the test history in " + path + ": " + (d.db ? sqlite3_errmsg(d.db) : "out of memory"));
  sqlite3_busy_timeout(d.db, 2000);
}

struct TestStats {
  std::string id;
  long long runs = 0, outcomes = 0, failed = 0, flaky = 0, flips = 0, muted = 0;
  double duration_sum = 0, duration_max = 0, last_at = 0;
  std::string last_result;
  double flip_rate() const { return outcomes > 0 ? static_cast<double>(flips) / static_cast<double>(outcomes) : 0; }
  double mean() const { return runs > 0 ? duration_sum / static_cast<double>(runs) : 0; }
  nlohmann::json json() const {
    return {{"id", id},
            {"runs", runs},
            {"failed", failed},
            {"flaky", flaky},
            {"flips", flips},
            {"flip_rate", std::round(flip_rate() * 1000) / 1000},
            {"muted", muted},
            {"mean_duration", std::round(mean() * 1000) / 1000},
            {"max_duration", duration_max},
            {"last_result", last_result},
            {"last_at", iso_from_epoch(last_at)}};
  }
};

// Folds one test_days row (the columns as kDayColumns selects them, from `first`) into a test's sums; the
// newest row's result is its last.
constexpr const char* kDayColumns = "runs, outcomes, failed, flaky, flips, muted, duration_sum, duration_max, last_at, last_result";
void add_day(TestStats& t, const Stmt& s, int first) {
  t.runs += s.integer(first), t.outcomes += s.integer(first + 1), t.failed += s.integer(first + 2), t.flaky += s.integer(first + 3);
  t.flips += s.integer(first + 4), t.muted += s.integer(first + 5);
  t.duration_sum += s.real(first + 6), t.duration_max = std::max(t.duration_max, s.real(first + 7));
  if (s.real(first + 8) >= t.last_at) t.last_at = s.real(first + 8), t.last_result = s.text(first + 9);
}

template <typename Less>
nlohmann::json top(std::vector<TestStats> list, std::size_t limit, Less less) {
  std::sort(list.begin(), list.end(), less);
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < list.size() && i < limit; ++i) out.push_back(list[i].json());
  return out;
}

long long day_of(double epoch) { return static_cast<long long>(std::floor(epoch / TestHistory::kDay)); }

// The window's test_days rows where `where` (ref or test) is `value`, summed by `by` (test or ref): read in
// index order and folded here rather than by a GROUP BY that would sort them (~750 rows a day for a ref).
std::map<std::string, TestStats> sums(sqlite3* db, const char* by, const char* where, const std::string& value, double since) {
  const std::string sql = std::string("SELECT ") + by + ", " + kDayColumns + " FROM test_days WHERE " + where + " = ? AND day >= ?";
  Stmt s(db, sql.c_str());
  s.bind(1, value).bind(2, day_of(since));
  std::map<std::string, TestStats> out;
  while (s.step()) add_day(out[s.text(0)], s, 1);
  return out;
}

}  // namespace

nlohmann::json TestHistoryQueries::ref_summary(const std::string& ref, double since, int limit) const {
  try {
    Db d;
    open_readonly(d, path_);
    std::map<std::string, TestStats> by_test = sums(d.db, "test", "ref", ref, since);  // by the primary key (ref, day, test)
    std::vector<TestStats> all;
    all.reserve(by_test.size());
    for (auto& [id, t] : by_test) {
      t.id = id;
      all.push_back(std::move(t));
    }
    std::vector<TestStats> flaky, failing;
    long long failures = 0;
    for (const TestStats& t : all) {
      if (t.flips > 0 || t.flaky > 0) flaky.push_back(t);
      if (t.failed > 0) failing.push_back(t);
      failures += t.failed;
    }
    const std::size_t n = static_cast<std::size_t>(limit);
    return {{"ref", ref},
            {"since", iso_from_epoch(since)},
            {"tests", all.size()},
            {"failures", failures},
            {"flaky", top(flaky, n, [](const TestStats& a, const TestStats& b) {
               return a.flip_rate() != b.flip_rate() ? a.flip_rate() > b.flip_rate() : a.flaky != b.flaky ? a.flaky > b.flaky : a.id < b.id;
             })},
            {"most_failing", top(failing, n, [](const TestStats& a, const TestStats& b) { return a.failed != b.failed ? a.failed > b.failed : a.id < b.id; })},
            {"slowest", top(all, n, [](const TestStats& a, const TestStats& b) { return a.mean() != b.mean() ? a.mean() > b.mean() : a.id < b.id; })}};
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

nlohmann::json TestHistoryQueries::test_history(const std::string& id, double since, int limit) const {
  try {
    Db d;
    open_readonly(d, path_);
    std::map<std::string, TestStats> by_ref = sums(d.db, "ref", "test", id, since);  // by test_days_by_test
    nlohmann::json refs = nlohmann::json::array();
    for (auto& [ref, t] : by_ref) {
      t.id = id;
      nlohmann::json j = t.json();
      j.erase("id");
      j["ref"] = ref;
      refs.push_back(std::move(j));
    }
    nlohmann::json results = nlohmann::json::array();
    {
      Stmt s(d.db,
             "SELECT ref, run, step, sha, attempt, result, cause, duration, cards, message, at FROM test_results WHERE test = ?"
             " ORDER BY at DESC, attempt DESC LIMIT ?");
      s.bind(1, id).bind(2, limit);
      while (s.step()) {
        nlohmann::json cards = nlohmann::json::parse(s.text(8), nullptr, false);
        results.push_back({{"ref", s.text(0)},
                           {"run", s.text(1)},
                           {"step", s.text(2)},
                           {"sha", s.text(3)},
                           {"attempt", s.integer(4)},
                           {"result", s.text(5)},
                           {"cause", s.text(6).empty() ? nlohmann::json(nullptr) : nlohmann::json(s.text(6))},
                           {"duration", s.real(7)},
                           {"cards", cards.is_discarded() ? nlohmann::json::array() : cards},
                           {"message", s.text(9).empty() ? nlohmann::json(nullptr) : nlohmann::json(s.text(9))},
                           {"at", iso_from_epoch(s.real(10))}});
      }
    }
    return {{"id", id}, {"since", iso_from_epoch(since)}, {"refs", refs}, {"results", results}};
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

bool TestHistoryQueries::flaky_before(const std::string& test, const std::string& ref, double since, const std::string& run) const {
  try {
    Db d;
    open_readonly(d, path_);
    Stmt s(d.db, "SELECT 1 FROM test_results WHERE test = ? AND at >= ? AND ref = ? AND run != ? AND cause = 'flaky' LIMIT 1");
    s.bind(1, test).bind(2, since).bind(3, ref).bind(4, run);
    return s.step();
  } catch (const std::exception&) {
    return true;  // unknown: not called new
  }
}

std::map<std::string, double> TestHistoryQueries::learned_seconds(const std::vector<std::string>& ids) const {
  std::map<std::string, double> out;
  try {
    Db d;
    open_readonly(d, path_);
    // One indexed lookup per test (test_results_by_test: test, at): ~750 for pypto's largest step.
    Stmt s(d.db, "SELECT duration FROM test_results WHERE test = ? AND result = 'passed' ORDER BY at DESC LIMIT ?");
    std::vector<double> samples;
    for (const std::string& id : ids) {
      samples.clear();
      s.reset().bind(1, id).bind(2, kLearnedTestSamples);
      while (s.step()) samples.push_back(s.real(0));
      if (samples.empty()) continue;
      std::sort(samples.begin(), samples.end());
      const std::size_t n = samples.size();
      out[id] = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    }
  } catch (const std::exception&) {
    return {};  // no history yet (a fresh state dir): every test counts alike
  }
  return out;
}

}  // namespace pto
