#include "store/journal.h"

#include <sys/stat.h>

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "store/sqlite_stmt.h"
#include "store/wal_checkpointer.h"
#include "util/json_text.h"

namespace pto {

namespace {

nlohmann::json parse_or_null(const std::string& s) {
  auto j = nlohmann::json::parse(s, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

}  // namespace

std::unique_ptr<Journal> Journal::open(const std::string& path, std::string& error) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    error = "cannot open journal " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return nullptr;
  }
  std::unique_ptr<Journal> j(new Journal(db, path));
  try {
    // WAL: readers never block the writer; synchronous=NORMAL: a commit survives a process crash (the case
    // recovery handles) without an fsync per step transition.
    j->exec("PRAGMA journal_mode=WAL");
    j->exec("PRAGMA synchronous=NORMAL");
    j->exec("PRAGMA busy_timeout=5000");
    // Debian builds SQLite with secure_delete on: every page a delete frees is written again, zeroed (a run's
    // engine state dropped, a record replaced: hundreds of pages into the WAL). FAST zeroes what is deleted
    // within the pages written anyway; the file is the daemon's alone (0600: docs/security.md).
    j->exec("PRAGMA secure_delete=FAST");
    // The daemon's alone: SQLite makes files 0644 and its -wal and -shm files take the database's mode.
    for (const char* suffix : {"", "-wal", "-shm"}) ::chmod((path + suffix).c_str(), 0600);
    j->exec(
        "CREATE TABLE IF NOT EXISTS runs(id TEXT PRIMARY KEY, created TEXT NOT NULL, finished TEXT, state TEXT NOT NULL,"
        " result INTEGER, request TEXT NOT NULL, skeleton TEXT NOT NULL, record TEXT)");
    j->exec(
        "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, kind TEXT NOT NULL,"
        " job INTEGER NOT NULL, step INTEGER NOT NULL, data TEXT NOT NULL)");
    j->exec("CREATE INDEX IF NOT EXISTS events_by_run ON events(run_id, seq)");
    j->exec("CREATE INDEX IF NOT EXISTS runs_by_created ON runs(created, id)");
    j->exec("CREATE TABLE IF NOT EXISTS step_durations(key TEXT NOT NULL, seconds REAL NOT NULL, finished TEXT NOT NULL)");
    j->exec("CREATE INDEX IF NOT EXISTS durations_by_key ON step_durations(key, finished)");
    j->exec("CREATE TABLE IF NOT EXISTS card_events(seq INTEGER PRIMARY KEY AUTOINCREMENT, card INTEGER NOT NULL, at REAL NOT NULL,"
            " data TEXT NOT NULL)");
    j->exec("CREATE INDEX IF NOT EXISTS card_events_by_time ON card_events(at)");
  } catch (const std::exception& e) {
    error = std::string("journal ") + path + ": " + e.what();
    return nullptr;
  }
  // Checkpoints on a thread of their own, not in a commit of the daemon's (store/wal_checkpointer). Without a
  // second connection the commits keep making them, as SQLite does by default.
  std::string no_checkpointer;
  j->checkpoints_ = WalCheckpointer::start(path, db, no_checkpointer);
  return j;
}

std::unique_ptr<Journal> Journal::open_readonly(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return nullptr;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return nullptr;
  }
  sqlite3_busy_timeout(db, 2000);
  return std::unique_ptr<Journal>(new Journal(db));
}

template <typename F>
bool Journal::write(F&& f) {
  try {
    f();
    write_error_.clear();
    return true;
  } catch (const std::exception& e) {
    write_error_ = e.what();
    return false;
  }
}

template <typename T, typename F>
T Journal::read(T fallback, F&& f) const {
  try {
    T out = f();
    read_error_.clear();
    return out;
  } catch (const std::exception& e) {
    read_error_ = e.what();
    return fallback;
  }
}

std::string Journal::check_integrity() const {
  try {
    Stmt s = stmt("PRAGMA quick_check");
    std::string out;
    while (s.step())
      if (s.text(0) != "ok") out += (out.empty() ? "" : "; ") + s.text(0);
    return out;
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::size_t Journal::run_count() const {
  Stmt s = stmt("SELECT COUNT(*) FROM runs");
  return s.step() ? static_cast<std::size_t>(s.integer(0)) : 0;
}

bool Journal::restore_run(const nlohmann::json& r) {
  return write([&] {
    stmt("INSERT OR REPLACE INTO runs(id, created, finished, state, result, request, skeleton, record) VALUES(?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(1, r.value("id", ""))
        .bind(2, r.value("created", ""))
        .bind(3, r.contains("finished") && r["finished"].is_string() ? r["finished"].get<std::string>() : "")
        .bind(4, r.value("state", "interrupted"))
        .bind(5, r.contains("result") && r["result"].is_number() ? r["result"].get<long long>() : 3LL)
        .bind(6, dump_json(r.value("request", nlohmann::json::object())))
        .bind(7, dump_json(r))
        .bind(8, dump_json(r))
        .step();
  });
}

bool Journal::record_durations(const std::vector<DurationRow>& rows) {
  if (rows.empty()) return true;
  return write([&] {
    exec("BEGIN");
    try {
      std::set<std::string> keys;
      for (const DurationRow& r : rows) {
        stmt("INSERT INTO step_durations(key, seconds, finished) VALUES(?, ?, ?)").bind(1, r.key).bind(2, r.seconds).bind(3, r.finished).step();
        keys.insert(r.key);
      }
      for (const std::string& key : keys)  // each key pruned once a batch
        stmt("DELETE FROM step_durations WHERE key = ? AND rowid NOT IN (SELECT rowid FROM step_durations WHERE key = ? "
             "ORDER BY finished DESC, rowid DESC LIMIT ?)")
            .bind(1, key)
            .bind(2, key)
            .bind(3, kKeptDurations)
            .step();
      exec("COMMIT");
    } catch (...) {
      exec("ROLLBACK");
      throw;
    }
  });
}

bool Journal::add_card_events(const std::vector<CardEventRow>& rows) {
  if (rows.empty()) return true;
  return write([&] {
    // One transaction for the batch: a commit per lease's end was most of what its row cost.
    exec("BEGIN");
    try {
      for (const CardEventRow& r : rows)
        stmt("INSERT INTO card_events(card, at, data) VALUES(?, ?, ?)").bind(1, static_cast<long long>(r.card)).bind(2, r.at).bind(3, r.data).step();
      // Pruned at most hourly: a DELETE at every lease's end was a tenth of its cost.
      const double at = rows.back().at;
      if (at - card_events_pruned_at_ >= 3600) {
        stmt("DELETE FROM card_events WHERE at < ?").bind(1, at - kCardEventDays * 86400).step();
        card_events_pruned_at_ = at;
      }
      exec("COMMIT");
    } catch (...) {
      exec("ROLLBACK");
      throw;
    }
  });
}

std::vector<std::pair<int, nlohmann::json>> Journal::card_events(double since) const {
  return read<std::vector<std::pair<int, nlohmann::json>>>({}, [&] {
    std::vector<std::pair<int, nlohmann::json>> out;
    Stmt s = stmt("SELECT card, data FROM card_events WHERE at >= ? ORDER BY at, seq");
    s.bind(1, since);
    while (s.step()) {
      auto data = nlohmann::json::parse(s.text(1), nullptr, false);
      if (!data.is_discarded()) out.emplace_back(static_cast<int>(s.integer(0)), std::move(data));
    }
    return out;
  });
}

std::vector<double> Journal::durations(const std::string& step_key) const {
  auto found = durations(std::vector<std::string>{step_key});
  return found.empty() ? std::vector<double>{} : std::move(found.begin()->second);
}

std::map<std::string, std::vector<double>> Journal::durations(const std::vector<std::string>& step_keys) const {
  using Found = std::map<std::string, std::vector<double>>;
  return read<Found>({}, [&]() -> Found {
    Found out;
    try {
      Stmt s = stmt("SELECT key, seconds FROM step_durations WHERE key IN (SELECT value FROM json_each(?)) "
                    "ORDER BY key, finished DESC, rowid DESC");
      s.bind(1, nlohmann::json(step_keys).dump());
      while (s.step()) {
        std::vector<double>& kept = out[s.text(0)];
        if (static_cast<int>(kept.size()) < kKeptDurations) kept.push_back(s.real(1));  // a batch not pruned yet
      }
    } catch (const std::exception&) {
      // A journal from before durations were kept (opened read-only): no history yet.
    }
    return out;
  });
}

Journal::Journal(sqlite3* db, std::string path) : db_(db), stmts_(std::make_unique<StmtCache>(db)), path_(std::move(path)) {}

Journal::~Journal() {
  checkpoints_.reset();
  stmts_.reset();
  sqlite3_close(db_);
}

Stmt Journal::stmt(const char* sql) const { return (*stmts_)(sql); }

void Journal::exec(const char* sql) const { sqlite_exec(db_, sql); }

bool Journal::run_created(const std::string& id, const std::string& created, const nlohmann::json& request,
                          const std::string& skeleton) {
  return write([&] {
    stmt("INSERT INTO runs(id, created, state, request, skeleton) VALUES(?, ?, 'running', ?, ?)")
        .bind(1, id)
        .bind(2, created)
        .bind(3, dump_json(request))
        .bind(4, skeleton)
        .step();
  });
}

bool Journal::event(const std::string& run, const std::string& kind, int job, int step, const nlohmann::json& data) {
  return write([&] {
    stmt("INSERT INTO events(run_id, kind, job, step, data) VALUES(?, ?, ?, ?, ?)")
        .bind(1, run)
        .bind(2, kind)
        .bind(3, job)
        .bind(4, step)
        .bind(5, dump_json(data))
        .step();
  });
}

bool Journal::together(const std::function<bool()>& f) {
  if (!sqlite3_get_autocommit(db_)) return f();  // already inside one
  try {
    (*stmts_)("BEGIN IMMEDIATE").step();
  } catch (const std::exception&) {
    return f();  // each write on its own, as without
  }
  const bool ok = f();
  // A full disk or an I/O error rolls the whole transaction back at once: nothing to commit, and the write's
  // own error is the one to tell.
  if (sqlite3_get_autocommit(db_)) return false;
  try {
    (*stmts_)("COMMIT").step();
    return ok;
  } catch (const std::exception& e) {
    if (ok) write_error_ = e.what();
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return false;
  }
}

bool Journal::begin_group() {
  if (!sqlite3_get_autocommit(db_)) return false;
  try {
    (*stmts_)("BEGIN IMMEDIATE").step();
    return true;
  } catch (const std::exception& e) {
    write_error_ = e.what();
    return false;
  }
}

bool Journal::group_lost() const { return sqlite3_get_autocommit(db_) != 0; }

bool Journal::commit_group() {
  if (group_lost()) {
    if (write_error_.empty()) write_error_ = sqlite3_errmsg(db_);
    return false;
  }
  try {
    (*stmts_)("COMMIT").step();
    return true;
  } catch (const std::exception& e) {
    write_error_ = e.what();
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return false;
  }
}

bool Journal::run_finished(const std::string& id, const std::string& state, int result, const nlohmann::json& record,
                           const std::string& text) {
  return write([&] {
    // A run whose creation could not be journaled (the disk was full then) is inserted now. A finished run is
    // read from its record: its skeleton (as big) is not kept beside it.
    stmt("INSERT OR IGNORE INTO runs(id, created, state, request, skeleton) VALUES(?, ?, ?, ?, '')")
        .bind(1, id)
        .bind(2, record.value("created", std::string()))
        .bind(3, state)
        .bind(4, dump_json(record.value("request", nlohmann::json::object())))
        .step();
    stmt("UPDATE runs SET finished = ?, state = ?, result = ?, record = ?, skeleton = '' WHERE id = ?")
        .bind(1, record.value("finished", std::string()))
        .bind(2, state)
        .bind(3, result)
        .bind(4, text)
        .bind(5, id)
        .step();
    // The final record holds everything the events said; keep the table from growing with history.
    stmt("DELETE FROM events WHERE run_id = ?").bind(1, id).step();
  });
}

bool Journal::has_run(const std::string& id) const {
  return read<bool>(true, [&]() -> bool {
    Stmt s = stmt("SELECT 1 FROM runs WHERE id = ?");
    s.bind(1, id);
    return s.step();
  });
}

std::vector<std::string> Journal::prune(int max_runs, const std::string& finished_before) {
  std::vector<std::string> ids;
  if (db_ == nullptr) return ids;
  if (max_runs > 0) {
    Stmt s = stmt("SELECT id FROM runs WHERE record IS NOT NULL ORDER BY created DESC, id DESC LIMIT -1 OFFSET ?");
    s.bind(1, max_runs);
    while (s.step()) ids.push_back(s.text(0));
  }
  if (!finished_before.empty()) {
    Stmt s = stmt("SELECT id FROM runs WHERE record IS NOT NULL AND finished < ? ORDER BY created");
    s.bind(1, finished_before);
    while (s.step()) ids.push_back(s.text(0));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) return ids;
  exec("BEGIN");
  try {
    for (const auto& id : ids) {
      stmt("DELETE FROM runs WHERE id = ?").bind(1, id).step();
      stmt("DELETE FROM events WHERE run_id = ?").bind(1, id).step();
    }
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
  // Deleted rows leave free pages; after a large prune give them back to the filesystem, so a long history
  // pruned to its bound really shrinks the file (VACUUM rewrites it: ms for thousands of runs).
  if (ids.size() >= 500) {
    try {
      exec("VACUUM");
    } catch (...) {
      // No space to rewrite it: the file just stays large; the rows are gone all the same.
    }
  }
  return ids;
}

std::vector<std::string> Journal::finished_runs_after(int keep) const {
  return read<std::vector<std::string>>({}, [&]() -> std::vector<std::string> {
    std::vector<std::string> ids;
    Stmt s = stmt("SELECT id FROM runs WHERE record IS NOT NULL ORDER BY created DESC, id DESC LIMIT -1 OFFSET ?");
    s.bind(1, keep);
    while (s.step()) ids.push_back(s.text(0));
    return ids;
  });
}

std::vector<RunSummary> Journal::list_runs(int limit) const {
  return read<std::vector<RunSummary>>({}, [&]() -> std::vector<RunSummary> {
    std::vector<RunSummary> out;
    Stmt s = stmt("SELECT id, state, created, COALESCE(finished, ''), COALESCE(result, -1), request FROM runs "
                "ORDER BY created DESC, id DESC LIMIT ?");
    s.bind(1, limit);
    while (s.step())
      out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), static_cast<int>(s.integer(4)), parse_or_null(s.text(5))});
    return out;
  });
}

nlohmann::json Journal::replay(const std::string& id, nlohmann::json record) const {
  Stmt s = stmt("SELECT kind, job, step, data FROM events WHERE run_id = ? ORDER BY seq");
  s.bind(1, id);
  while (s.step()) {
    auto data = parse_or_null(s.text(3));
    auto job = static_cast<std::size_t>(s.integer(1));
    auto step = static_cast<std::size_t>(s.integer(2));
    if (!record.contains("jobs") || job >= record["jobs"].size()) continue;
    auto& j = record["jobs"][job];
    if (s.text(0) == "job") {
      for (auto& [k, v] : data.items())
        if (k != "steps") j[k] = v;
    } else if (j.contains("steps") && step < j["steps"].size()) {
      j["steps"][step] = data;
    }
  }
  return record;
}

std::optional<nlohmann::json> Journal::run_record(const std::string& id) const {
  return read<std::optional<nlohmann::json>>(std::nullopt, [&]() -> std::optional<nlohmann::json> {
    Stmt s = stmt("SELECT record, skeleton FROM runs WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    std::string record = s.text(0);
    if (!record.empty()) return parse_or_null(record);
    return replay(id, parse_or_null(s.text(1)));
  });
}

std::vector<nlohmann::json> Journal::unfinished_runs() const {
  std::vector<std::pair<std::string, std::string>> rows;
  {
    Stmt s = stmt("SELECT id, skeleton FROM runs WHERE record IS NULL ORDER BY created");
    while (s.step()) rows.emplace_back(s.text(0), s.text(1));
  }
  std::vector<nlohmann::json> out;
  for (const auto& [id, skeleton] : rows) out.push_back(replay(id, parse_or_null(skeleton)));
  return out;
}

std::map<std::string, int> Journal::runs_by_state() const {
  return read<std::map<std::string, int>>({}, [&]() -> std::map<std::string, int> {
    std::map<std::string, int> out;
    Stmt s = stmt("SELECT state, COUNT(*) FROM runs GROUP BY state");
    while (s.step()) out[s.text(0)] = static_cast<int>(s.integer(1));
    return out;
  });
}

}  // namespace pto
