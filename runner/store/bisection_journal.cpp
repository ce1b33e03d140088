#include "store/bisection_journal.h"

#include <sqlite3.h>

#include "store/sqlite_stmt.h"

namespace pto {

std::unique_ptr<BisectionJournal> BisectionJournal::open(const std::string& path, std::string& error) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    error = "cannot open the bisections in " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return nullptr;
  }
  std::unique_ptr<BisectionJournal> j(new BisectionJournal(db));
  try {
    sqlite_exec(db, "PRAGMA busy_timeout=5000");
    sqlite_exec(db, "PRAGMA synchronous=NORMAL");
    sqlite_exec(db, "CREATE TABLE IF NOT EXISTS bisections(id TEXT PRIMARY KEY, created REAL NOT NULL, state TEXT NOT NULL, record TEXT NOT NULL)");
  } catch (const std::exception& e) {
    error = "bisections in " + path + ": " + e.what();
    return nullptr;
  }
  return j;
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
