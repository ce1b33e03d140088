#include "store/bisection_journal.h"

#include <sqlite3.h>

#include "store/side_table.h"

namespace pto {

std::unique_ptr<BisectionJournal> BisectionJournal::open(const std::string& path, std::string& error) {
  sqlite3* db = open_side_connection(
      path, "the bisections", {"CREATE TABLE IF NOT EXISTS bisections(id TEXT PRIMARY KEY, created REAL NOT NULL, state TEXT NOT NULL, record TEXT NOT NULL)"},
      error);
  return db ? std::unique_ptr<BisectionJournal>(new BisectionJournal(db)) : nullptr;
}

BisectionJournal::~BisectionJournal() { sqlite3_close(db_); }

bool BisectionJournal::save(const std::string& id, const std::string& state, const nlohmann::json& record, double now) {
  try {
    Stmt s(db_, "INSERT INTO bisections(id, created, state, record) VALUES(?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET state = excluded.state,"
                " record = excluded.record");
    s.bind(1, id).bind(2, now).bind(3, state).bind(4, record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    s.step();
    error_.clear();
    return true;
  } catch (const std::exception& e) {
    error_ = std::string("bisections: ") + e.what();
    return false;
  }
}

std::vector<nlohmann::json> BisectionJournal::load(int limit) {
  std::vector<nlohmann::json> out;
  try {
    Stmt s(db_, "SELECT record FROM bisections ORDER BY created DESC LIMIT ?");
    s.bind(1, limit);
    while (s.step()) {
      nlohmann::json j = nlohmann::json::parse(s.text(0), nullptr, false);
      if (!j.is_discarded()) out.push_back(std::move(j));
    }
  } catch (const std::exception& e) {
    error_ = std::string("bisections: ") + e.what();
  }
  return out;
}

}  // namespace pto
