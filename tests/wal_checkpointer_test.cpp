// The journal's checkpoints on a thread of their own (store/wal_checkpointer): the WAL is copied back into the
// database file without a commit of the writer's making the copy, and past the cap the writer does it itself.
#include <sqlite3.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "store/journal.h"
#include "store/side_table.h"
#include "store/sqlite_stmt.h"
#include "store/wal_checkpointer.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {

long long file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

sqlite3* open_wal(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite_exec(db, "PRAGMA journal_mode=WAL");
  sqlite_exec(db, "PRAGMA synchronous=NORMAL");
  sqlite_exec(db, "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT NOT NULL)");
  return db;
}

/// `n` commits of a 2 KB row each: a page or more of WAL apiece.
void commit_rows(sqlite3* db, int n) {
  Stmt insert(db, "INSERT INTO t(v) VALUES(?)");
  for (int i = 0; i < n; ++i) {
    insert.bind(1, std::string(2048, static_cast<char>('a' + i % 26)));
    insert.step();
    insert.reset();
  }
}

/// `n` 2 KB rows in one commit: the checkpoint it sets off runs with no commit of the writer beside it.
void commit_rows_at_once(sqlite3* db, int n) {
  sqlite_exec(db, "BEGIN");
  commit_rows(db, n);
  sqlite_exec(db, "COMMIT");
}

int autocheckpoint_of(sqlite3* db) {
  Stmt s(db, "PRAGMA wal_autocheckpoint");
  REQUIRE(s.step());
  return static_cast<int>(s.integer(0));
}

}  // namespace

TEST_CASE("wal checkpointer: the WAL goes back into the file on its own thread, no commit of the writer copies it", "[store]") {
  TempDir dir;
  const std::string path = (dir.path() / "journal.sqlite").string();
  sqlite3* db = open_wal(path);
  const long long before = file_size(path);
  std::string error;
  {
    auto c = WalCheckpointer::start(path, db, error, /*threshold=*/40, /*cap=*/100000);
    REQUIRE(c);
    CHECK(autocheckpoint_of(db) == 0);  // SQLite's own checkpoint in the commit is off
    commit_rows(db, 200);
    c->wait_idle();
    CHECK(c->checkpoints() >= 1);
    CHECK(c->writer_checkpoints() == 0);
    CHECK(file_size(path) > before + 100 * 2048);  // the rows are in the database file itself
    // Copied whole, the WAL starts over at a next commit: its file (never truncated) grows no further, where
    // five more rounds of 100 rows would have added ~250 pages to it. (One commit a round: a commit made while
    // the checkpointer copies cannot start the WAL over, so a round of many commits races with it.)
    commit_rows_at_once(db, 100);
    c->wait_idle();
    const long long wal = file_size(path + "-wal");
    for (int round = 0; round < 5; ++round) {
      commit_rows_at_once(db, 100);
      c->wait_idle();
    }
    CHECK(file_size(path + "-wal") <= wal);
  }
  CHECK(autocheckpoint_of(db) == WalCheckpointer::kThresholdPages);  // given back to SQLite at the end
  sqlite3_close(db);
}

TEST_CASE("wal checkpointer: past the cap the writer copies the WAL itself", "[store]") {
  TempDir dir;
  const std::string path = (dir.path() / "journal.sqlite").string();
  sqlite3* db = open_wal(path);
  const long long before = file_size(path);
  std::string error;
  auto c = WalCheckpointer::start(path, db, error, /*threshold=*/1 << 30, /*cap=*/30);
  REQUIRE(c);
  commit_rows(db, 60);
  CHECK(c->writer_checkpoints() >= 1);
  CHECK(c->checkpoints() == 0);
  CHECK(file_size(path) > before + 20 * 2048);
  c.reset();
  sqlite3_close(db);
}

TEST_CASE("journal: its checkpoints are made by a checkpointer of its own", "[store]") {
  TempDir dir;
  std::string error;
  auto journal = Journal::open((dir.path() / "journal.sqlite").string(), error);
  REQUIRE(journal);
  REQUIRE(journal->checkpoints());
  CHECK(autocheckpoint_of(journal->connection()) == 0);
  // Another store's connection of the file (the test history, the results...) leaves the copy to it too, up
  // to the cap.
  sqlite3* side = open_side_connection((dir.path() / "journal.sqlite").string(), "a store", {"CREATE TABLE IF NOT EXISTS s(x)"}, error);
  REQUIRE(side);
  CHECK(autocheckpoint_of(side) == WalCheckpointer::kCapPages);
  sqlite3_close(side);
}
