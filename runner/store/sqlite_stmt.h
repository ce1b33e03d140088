#pragma once
// One prepared SQLite statement, bound and stepped; errors as exceptions, which each store's owner turns into
// its "never throws" answer (store/journal, store/case_history). Header-only: small and used by both.
// StmtCache keeps a connection's frequent statements prepared: preparing one cost more than the write it made
// (a lease's end was 9% SQL parsing, perf in bench/README.md).
#include <sqlite3.h>

#include <map>
#include <stdexcept>
#include <string>

namespace pto {

class Stmt {
  // Not copyable: it owns the prepared statement.
 public:
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("journal: ") + sqlite3_errmsg(db));
  }
  /// A statement of a StmtCache: reset and handed back (not finalized) when this goes.
  Stmt(sqlite3* db, sqlite3_stmt* borrowed, bool* in_use) : db_(db), s_(borrowed), in_use_(in_use) {}
  ~Stmt() {
    if (!in_use_) {
      sqlite3_finalize(s_);
      return;
    }
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    *in_use_ = false;
  }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, long long v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<long long>(v)); }
  /// For the next row of a statement stepped in a loop.
  Stmt& reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) throw std::runtime_error(std::string("journal: ") + sqlite3_errmsg(db_));
    return false;
  }
  std::string text(int col) const {
    auto p = sqlite3_column_text(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(s_, col))) : "";
  }
  long long integer(int col) const { return sqlite3_column_int64(s_, col); }
  double real(int col) const { return sqlite3_column_double(s_, col); }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  bool* in_use_ = nullptr;  // set: borrowed from a StmtCache
};

/// One connection's prepared statements, by their SQL; one thread's alone, as the connection is. A statement
/// still in use (a loop over one query calling another with the same SQL) gets a fresh one of its own.
/// clear() before the connection closes: SQLite does not close a connection with statements left.
class StmtCache {
 public:
  explicit StmtCache(sqlite3* db) : db_(db) {}
  StmtCache(const StmtCache&) = delete;
  StmtCache& operator=(const StmtCache&) = delete;
  ~StmtCache() { clear(); }
  Stmt operator()(const char* sql) {
    auto it = cache_.find(sql);
    if (it == cache_.end()) {
      sqlite3_stmt* s = nullptr;
      if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
        throw std::runtime_error(std::string("journal: ") + sqlite3_errmsg(db_));
      it = cache_.emplace(sql, Entry{s, false}).first;
    }
    if (it->second.in_use) return Stmt(db_, sql);
    it->second.in_use = true;
    return Stmt(db_, it->second.stmt, &it->second.in_use);
  }
  void clear() {
    for (auto& [sql, e] : cache_) sqlite3_finalize(e.stmt);
    cache_.clear();
  }

 private:
  struct Entry {
    sqlite3_stmt* stmt;
    bool in_use;
  };
  sqlite3* db_;
  std::map<std::string, Entry, std::less<>> cache_;  // std::map: an entry's address stays while others come
};

/// Runs SQL without results (schema, BEGIN/COMMIT); throws with SQLite's message.
inline void sqlite_exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw std::runtime_error(msg);
  }
}

}  // namespace pto
