#include "store/perf_history.h"

#include <sqlite3.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "store/side_table.h"

namespace pto {

std::unique_ptr<PerfHistory> PerfHistory::open(const std::string& path, std::string& error) {
  sqlite3* db = open_side_connection(
      path, "the perf history",
      {"CREATE TABLE IF NOT EXISTS perf_samples(metric TEXT NOT NULL, ref TEXT NOT NULL, card_type TEXT NOT NULL, unit TEXT NOT NULL,"
       " run TEXT NOT NULL, step TEXT NOT NULL, sha TEXT NOT NULL, at REAL NOT NULL, samples TEXT NOT NULL, base_samples TEXT NOT NULL,"
       " cards TEXT NOT NULL, median REAL NOT NULL, verdict TEXT NOT NULL, change TEXT NOT NULL, PRIMARY KEY(run, step))",
       "CREATE INDEX IF NOT EXISTS perf_samples_series ON perf_samples(metric, ref, at)"},
      error);
  return db ? std::unique_ptr<PerfHistory>(new PerfHistory(db)) : nullptr;
}

PerfHistory::~PerfHistory() { sqlite3_close(db_); }

std::string PerfHistory::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

bool PerfHistory::record(const PerfRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  return side_transaction(db_, error_, "perf history", [&] {
    Stmt s(db_,
           "INSERT OR REPLACE INTO perf_samples(metric, ref, card_type, unit, run, step, sha, at, samples, base_samples, cards, median, verdict, change) "
           "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    s.bind(1, r.metric).bind(2, r.ref).bind(3, r.card_type).bind(4, r.unit).bind(5, r.run).bind(6, r.step).bind(7, r.commit).bind(8, r.at);
    s.bind(9, nlohmann::json(r.samples).dump()).bind(10, nlohmann::json(r.base_samples).dump()).bind(11, nlohmann::json(r.cards).dump());
    s.bind(12, r.median).bind(13, r.verdict).bind(14, r.change);
    s.step();
  });
}

std::vector<PerfRecord> PerfHistory::series(const std::string& metric, const std::string& ref, const std::string& card_type, int limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PerfRecord> out;
  try {
    Stmt s(db_,
           "SELECT metric, ref, card_type, unit, run, step, sha, at, samples, base_samples, cards, median, verdict, change FROM perf_samples "
           "WHERE metric = ? AND ref = ? AND (? = '' OR card_type = ?) ORDER BY at DESC LIMIT ?");
    s.bind(1, metric).bind(2, ref).bind(3, card_type).bind(4, card_type).bind(5, limit);
    auto numbers = [](const std::string& text, auto& into) {
      const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_array())
        for (const auto& v : j)
          if (v.is_number()) into.push_back(v.get<typename std::decay_t<decltype(into)>::value_type>());
    };
    while (s.step()) {
      PerfRecord r;
      r.metric = s.text(0), r.ref = s.text(1), r.card_type = s.text(2), r.unit = s.text(3);
      r.run = s.text(4), r.step = s.text(5), r.commit = s.text(6), r.at = s.real(7);
      numbers(s.text(8), r.samples);
      numbers(s.text(9), r.base_samples);
      numbers(s.text(10), r.cards);
      r.median = s.real(11), r.verdict = s.text(12), r.change = s.text(13);
      out.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    error_ = std::string("perf history: ") + e.what();
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> PerfHistory::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  try {
    Stmt s(db_, "SELECT DISTINCT metric, ref FROM perf_samples ORDER BY metric, ref");
    while (s.step()) out.emplace_back(s.text(0), s.text(1));
  } catch (const std::exception& e) {
    error_ = std::string("perf history: ") + e.what();
  }
  return out;
}

bool PerfHistory::prune() {
  std::lock_guard<std::mutex> lock(mu_);
  return side_transaction(db_, error_, "perf history", [&] {
    Stmt gone(db_, "DELETE FROM perf_samples WHERE ref NOT LIKE 'refs/heads/%' AND run NOT IN (SELECT id FROM runs)");
    gone.step();
  });
}

}  // namespace pto
