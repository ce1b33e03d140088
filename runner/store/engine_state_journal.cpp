#include "store/engine_state_journal.h"

#include <sqlite3.h>

#include "store/side_table.h"

namespace pto {

namespace {
std::string text_of(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

/// engine_steps' `view` column (each step as the API renders it, in place of a journal event), added to a file
/// an older daemon made.
bool add_view_column(sqlite3* db, std::string& error) {
  try {
    Stmt cols(db, "SELECT 1 FROM pragma_table_info('engine_steps') WHERE name = 'view'");
    if (!cols.step()) sqlite_exec(db, "ALTER TABLE engine_steps ADD COLUMN view TEXT");
    return true;
  } catch (const std::exception& e) {
    error = std::string("the runs' engine state: ") + e.what();
    return false;
  }
}
}  // namespace

std::unique_ptr<EngineStateJournal> EngineStateJournal::open(const std::string& path, std::string& error) {
  sqlite3* db = open_side_connection(
      path, "the runs' engine state",
      {"CREATE TABLE IF NOT EXISTS engine_runs(run TEXT PRIMARY KEY, head TEXT NOT NULL)",
       "CREATE TABLE IF NOT EXISTS engine_steps(run TEXT NOT NULL, job INTEGER NOT NULL, step INTEGER NOT NULL, state TEXT NOT NULL,"
       " view TEXT, PRIMARY KEY(run, job, step))"},
      error);
  if (db && !add_view_column(db, error)) {
    sqlite3_close(db);
    return nullptr;
  }
  return db ? std::unique_ptr<EngineStateJournal>(new EngineStateJournal(db)) : nullptr;
}

std::unique_ptr<EngineStateJournal> EngineStateJournal::on(sqlite3* journal, std::string& error) {
  try {
    sqlite_exec(journal, "CREATE TABLE IF NOT EXISTS engine_runs(run TEXT PRIMARY KEY, head TEXT NOT NULL)");
    sqlite_exec(journal,
                "CREATE TABLE IF NOT EXISTS engine_steps(run TEXT NOT NULL, job INTEGER NOT NULL, step INTEGER NOT NULL, state TEXT NOT NULL,"
                " view TEXT, PRIMARY KEY(run, job, step))");
  } catch (const std::exception& e) {
    error = std::string("the runs' engine state: ") + e.what();
    return nullptr;
  }
  if (!add_view_column(journal, error)) return nullptr;
  auto j = std::unique_ptr<EngineStateJournal>(new EngineStateJournal(journal));
  j->owns_ = false;
  return j;
}

EngineStateJournal::EngineStateJournal(sqlite3* db) : db_(db), stmts_(std::make_unique<StmtCache>(db)) {}

EngineStateJournal::~EngineStateJournal() {
  stmts_->clear();  // SQLite closes no connection with statements left
  if (owns_) sqlite3_close(db_);
}

namespace {
constexpr const char* kSaveHead = "INSERT INTO engine_runs(run, head) VALUES(?, ?) ON CONFLICT(run) DO UPDATE SET head = excluded.head";
// A step's view is kept with its state at a transition; a change of its state alone keeps the view it had.
constexpr const char* kSaveStep =
    "INSERT INTO engine_steps(run, job, step, state, view) VALUES(?, ?, ?, ?, ?) ON CONFLICT(run, job, step) DO UPDATE SET "
    "state = excluded.state, view = COALESCE(excluded.view, view)";
}  // namespace

bool EngineStateJournal::save(const std::string& run, const nlohmann::json* head, int job, int step, const nlohmann::json& step_state,
                              const nlohmann::json* view) {
  // Most transitions change one step and leave the head as it was: the head is written when it changed.
  std::string head_text = head ? text_of(*head) : "";
  auto known = heads_.find(run);
  const bool head_changed = head && (known == heads_.end() || known->second != head_text);
  const bool ok = side_transaction(
      db_, error_, "engine state",
      [&] {
        if (head_changed) (*stmts_)(kSaveHead).bind(1, run).bind(2, head_text).step();
        Stmt save = (*stmts_)(kSaveStep);
        save.bind(1, run).bind(2, job).bind(3, step).bind(4, text_of(step_state));
        if (view) save.bind(5, text_of(*view));  // unbound: NULL, the view it had is kept
        save.step();
      },
      stmts_.get());
  if (ok && head_changed) heads_[run] = std::move(head_text);
  if (!ok) heads_.erase(run);  // not known to be written: write it next time
  return ok;
}

bool EngineStateJournal::save_head(const std::string& run, const nlohmann::json& head) {
  std::string head_text = text_of(head);
  if (auto known = heads_.find(run); known != heads_.end() && known->second == head_text) return true;
  const bool ok = side_transaction(
      db_, error_, "engine state", [&] { (*stmts_)(kSaveHead).bind(1, run).bind(2, head_text).step(); }, stmts_.get());
  if (ok) heads_[run] = std::move(head_text);
  else heads_.erase(run);
  return ok;
}

std::optional<nlohmann::json> EngineStateJournal::load(const std::string& run) {
  try {
    Stmt h(db_, "SELECT head FROM engine_runs WHERE run = ?");
    h.bind(1, run);
    if (!h.step()) return std::nullopt;
    nlohmann::json state = nlohmann::json::parse(h.text(0), nullptr, false);
    if (!state.is_object() || !state.contains("jobs") || !state["jobs"].is_array()) return std::nullopt;
    for (auto& job : state["jobs"]) job["steps"] = nlohmann::json::array();
    Stmt s(db_, "SELECT job, step, state FROM engine_steps WHERE run = ? ORDER BY job, step");
    s.bind(1, run);
    while (s.step()) {
      const auto job = static_cast<std::size_t>(s.integer(0)), step = static_cast<std::size_t>(s.integer(1));
      if (job >= state["jobs"].size()) continue;
      auto& steps = state["jobs"][job]["steps"];
      while (steps.size() <= step) steps.push_back(nullptr);
      steps[step] = nlohmann::json::parse(s.text(2), nullptr, false);
    }
    error_.clear();
    return state;
  } catch (const std::exception& e) {
    error_ = std::string("engine state: ") + e.what();
    return std::nullopt;
  }
}

void EngineStateJournal::apply_views(const std::string& run, nlohmann::json& record) {
  try {
    Stmt s(db_, "SELECT job, step, view FROM engine_steps WHERE run = ? AND view IS NOT NULL");
    s.bind(1, run);
    while (s.step()) {
      const auto job = static_cast<std::size_t>(s.integer(0)), step = static_cast<std::size_t>(s.integer(1));
      if (!record.contains("jobs") || job >= record["jobs"].size()) continue;
      nlohmann::json& steps = record["jobs"][job]["steps"];
      if (!steps.is_array() || step >= steps.size()) continue;
      nlohmann::json view = nlohmann::json::parse(s.text(2), nullptr, false);
      if (view.is_object()) steps[step] = std::move(view);
    }
  } catch (const std::exception& e) {
    error_ = std::string("engine state: ") + e.what();
  }
}

bool EngineStateJournal::drop(const std::string& run) {
  heads_.erase(run);
  return side_transaction(db_, error_, "engine state", [&] {
    Stmt a(db_, "DELETE FROM engine_runs WHERE run = ?");
    a.bind(1, run);
    a.step();
    Stmt b(db_, "DELETE FROM engine_steps WHERE run = ?");
    b.bind(1, run);
    b.step();
  });
}

}  // namespace pto
