#pragma once
// What every store that keeps its own tables in the journal's SQLite file shares (the test history, the
// notification outbox, the bisections): its own connection (busy timeout 5 s, WAL, synchronous=NORMAL: a
// commit survives the daemon's death, not the host's power loss, and costs no fsync), its schema made when
// missing, and writes in one transaction that never throw. Header-only: small, and used by three stores.
#include <sqlite3.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "store/sqlite_stmt.h"
#include "store/wal_checkpointer.h"

namespace pto {

/// What must happen on this thread before a connection of the journal's file begins a write of its own: the
/// journal's transaction left open for this turn's group commit (store/run_history_commits.cpp) is committed,
/// or the write would wait on its busy timeout for a commit that only this thread can make. Set by the run
/// history that groups; empty otherwise.
inline std::function<void()>& before_side_write() {
  thread_local std::function<void()> hook;
  return hook;
}

/// A connection to `path` with `schema` run on it (and `pragmas` first); null with `error` naming `what`.
inline sqlite3* open_side_connection(const std::string& path, const std::string& what, const std::vector<const char*>& schema,
                                     std::string& error, const std::vector<const char*>& pragmas = {}) {
  if (const auto& hook = before_side_write()) hook();  // its schema is a write too
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    error = "cannot open " + what + " in " + path + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return nullptr;
  }
  // Another connection of the file (the journal's, another store's) may hold its write lock past the busy
  // timeout on a loaded disk while this one makes its tables: tried once more before giving up.
  for (int attempt = 0;; ++attempt) {
    try {
      sqlite_exec(db, "PRAGMA busy_timeout=5000");
      sqlite_exec(db, "PRAGMA journal_mode=WAL");
      sqlite_exec(db, "PRAGMA synchronous=NORMAL");
      sqlite_exec(db, "PRAGMA secure_delete=FAST");  // as the journal's own connection (store/journal.cpp)
      // The journal's checkpointer copies the WAL back on its own thread (store/wal_checkpointer); a store's
      // commit does it only past the cap. (At SQLite's 1,000 pages, every commit on the engine's thread while
      // a busy run keeps the WAL past them would make a checkpoint, and its fsyncs.)
      sqlite_exec(db, ("PRAGMA wal_autocheckpoint=" + std::to_string(WalCheckpointer::kCapPages)).c_str());
      for (const char* sql : pragmas) sqlite_exec(db, sql);
      for (const char* sql : schema) sqlite_exec(db, sql);
      return db;
    } catch (const std::exception& e) {
      const int code = sqlite3_errcode(db);
      if ((code == SQLITE_BUSY || code == SQLITE_LOCKED) && attempt < 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      error = what + " in " + path + ": " + e.what();
      sqlite3_close(db);
      return nullptr;
    }
  }
}

/// Runs `f` (which may throw) in one BEGIN IMMEDIATE .. COMMIT, rolled back when it throws. False with
/// `error` set ("" after a success). With `stmts`, BEGIN and COMMIT are its prepared statements (a store
/// that writes per step transition: parsing them cost as much as the write).
template <typename F>
bool side_transaction(sqlite3* db, std::string& error, const std::string& what, F&& f, StmtCache* stmts = nullptr) {
  if (!sqlite3_get_autocommit(db)) {  // inside its connection's open transaction: part of it (its owner commits)
    try {
      f();
      return true;
    } catch (const std::exception& e) {
      error = what.empty() ? std::string(e.what()) : what + ": " + e.what();
      return false;
    }
  }
  if (const auto& hook = before_side_write()) hook();
  try {
    if (stmts) (*stmts)("BEGIN IMMEDIATE").step();
    else sqlite_exec(db, "BEGIN IMMEDIATE");
    try {
      f();
      if (stmts) (*stmts)("COMMIT").step();
      else sqlite_exec(db, "COMMIT");
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    error.clear();
    return true;
  } catch (const std::exception& e) {
    error = what.empty() ? std::string(e.what()) : what + ": " + e.what();
    return false;
  }
}

}  // namespace pto
