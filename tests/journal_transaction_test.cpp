// One transaction per step transition (store/journal: Journal::together; store/engine_state_journal on the
// journal's own connection): the step's event and the engine's state of it are committed together, so another
// connection of the file sees both or neither.
#include <sqlite3.h>

#include <catch2/catch.hpp>

#include "store/engine_state_journal.h"
#include "store/journal.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {
const nlohmann::json kHead = {{"id", "r1"}, {"jobs", nlohmann::json::array({nlohmann::json::object()})}};

/// Rows of `table` as another connection of the file sees them now.
int rows(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, ("SELECT count(*) FROM " + table).c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  const int n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}
}  // namespace

TEST_CASE("journal: a step's event and its engine state are one transaction on one connection", "[store]") {
  TempDir dir;
  const std::string path = (dir.path() / "journal.sqlite").string();
  std::string error;
  auto journal = Journal::open(path, error);
  REQUIRE(journal);
  auto state = EngineStateJournal::on(journal->connection(), error);
  REQUIRE(state);
  const int events_before = rows(path, "events");

  const bool ok = journal->together([&] {
    const bool wrote = journal->event("r1", "step", 0, 0, {{"state", "running"}});
    CHECK(state->save("r1", kHead, 0, 0, {{"state", "running"}}));
    // Not committed yet: another connection sees neither write.
    CHECK(rows(path, "events") == events_before);
    CHECK(rows(path, "engine_steps") == 0);
    return wrote;
  });
  CHECK(ok);
  CHECK(rows(path, "events") == events_before + 1);
  CHECK(rows(path, "engine_steps") == 1);
  CHECK(rows(path, "engine_runs") == 1);
  // Outside a transaction each write commits on its own, as before.
  CHECK(state->save("r1", kHead, 0, 1, {{"state", "waiting"}}));
  CHECK(rows(path, "engine_steps") == 2);
  auto kept = state->load("r1");
  REQUIRE(kept);
  CHECK((*kept)["jobs"][0]["steps"][1]["state"] == "waiting");
}
