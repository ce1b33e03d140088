#pragma once
// One prepared SQLite statement, bound and stepped; errors as exceptions, which each store's owner turns into
// its "never throws" answer (store/journal, store/test_history). Header-only: small and used by both.
#include <sqlite3.h>

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
  ~Stmt() { sqlite3_finalize(s_); }
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
