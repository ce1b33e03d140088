#include "store/step_results.h"

#include <sqlite3.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "store/side_table.h"

namespace pto {

std::unique_ptr<StepResults> StepResults::open(const std::string& path, std::string& error) {
  sqlite3* db = open_side_connection(
      path, "the reusable results",
      {"CREATE TABLE IF NOT EXISTS step_results(key TEXT NOT NULL, scope TEXT NOT NULL, run TEXT NOT NULL, step TEXT NOT NULL,"
       " label TEXT NOT NULL, finished REAL NOT NULL, outputs TEXT NOT NULL, log TEXT NOT NULL, card_seconds REAL NOT NULL,"
       " tests TEXT NOT NULL DEFAULT '[]', PRIMARY KEY(run, step))",
       "CREATE INDEX IF NOT EXISTS step_results_key ON step_results(key, finished)"},
      error);
  return db ? std::unique_ptr<StepResults>(new StepResults(db)) : nullptr;
}

StepResults::~StepResults() { sqlite3_close(db_); }

bool StepResults::record(const StepResult& r) {
  return side_transaction(db_, error_, "reusable results", [&] {
    Stmt s(db_,
           "INSERT OR REPLACE INTO step_results(key, scope, run, step, label, finished, outputs, log, card_seconds, tests) "
           "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    nlohmann::json tests = nlohmann::json::array();
    for (const TestCase& c : r.tests) tests.push_back(c.json());
    s.bind(1, r.key).bind(2, r.scope).bind(3, r.run).bind(4, r.step).bind(5, r.label).bind(6, r.finished).bind(7, nlohmann::json(r.outputs).dump());
    s.bind(8, r.log).bind(9, r.card_seconds).bind(10, tests.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    s.step();
  });
}

std::optional<StepResult> StepResults::find(const std::string& key, const std::vector<std::string>& scopes, double since) {
  try {
    Stmt s(db_,
           "SELECT scope, run, step, label, finished, outputs, log, card_seconds, tests FROM step_results WHERE key = ? AND finished >= ? "
           "ORDER BY finished DESC");
    s.bind(1, key).bind(2, since);
    while (s.step()) {
      StepResult r;
      r.key = key;
      r.scope = s.text(0);
      if (!scopes.empty() && std::find(scopes.begin(), scopes.end(), r.scope) == scopes.end()) continue;
      r.run = s.text(1);
      r.step = s.text(2);
      r.label = s.text(3);
      r.finished = s.real(4);
      const nlohmann::json outputs = nlohmann::json::parse(s.text(5), nullptr, false);
      if (outputs.is_object())
        for (auto it = outputs.begin(); it != outputs.end(); ++it)
          if (it.value().is_string()) r.outputs[it.key()] = it.value().get<std::string>();
      r.log = s.text(6);
      r.card_seconds = s.real(7);
      const nlohmann::json tests = nlohmann::json::parse(s.text(8), nullptr, false);
      if (tests.is_array())
        for (const auto& c : tests) r.tests.push_back(TestCase::from_json(c));
      return r;
    }
    return std::nullopt;
  } catch (const std::exception& e) {
    error_ = std::string("reusable results: ") + e.what();
    return std::nullopt;
  }
}

bool StepResults::prune(double before) {
  return side_transaction(db_, error_, "reusable results", [&] {
    Stmt s(db_, "DELETE FROM step_results WHERE finished < ?");
    s.bind(1, before);
    s.step();
    // A result whose run retention removed has no log to link to any more.
    Stmt gone(db_, "DELETE FROM step_results WHERE run NOT IN (SELECT id FROM runs)");
    gone.step();
  });
}

}  // namespace pto
