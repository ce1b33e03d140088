// One transaction per step transition (store/journal: Journal::together; store/engine_state_journal on the
// journal's own connection): the step's event and the engine's state of it are committed together, so another
// connection of the file sees both or neither.
#include <sqlite3.h>

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "store/engine_state_journal.h"
#include "store/journal.h"
#include "store/run_history.h"
#include "store/run_reporter.h"
#include "store/side_table.h"
#include "util/state_paths.h"
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

/// A run history whose writes on this thread go into groups committed at the end of a turn of `io`.
struct GroupedHistory {
  TempDir dir;
  boost::asio::io_context io;
  boost::asio::thread_pool removals{1};
  ReadModel model;
  std::vector<std::string> failed;  // runs told their journal write failed
  RunHistory history{dir.str(), model, removals, nullptr, [this](const std::string& run, const std::string&) { failed.push_back(run); }};
  const std::string path = journal_file(dir.str());
  GroupedHistory() {
    REQUIRE(history.open(false).empty());
    history.group_commits(io);
  }
};
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
    CHECK(state->save("r1", &kHead, 0, 0, {{"state", "running"}}));
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
  CHECK(state->save("r1", &kHead, 0, 1, {{"state", "waiting"}}));
  CHECK(rows(path, "engine_steps") == 2);
  auto kept = state->load("r1");
  REQUIRE(kept);
  CHECK((*kept)["jobs"][0]["steps"][1]["state"] == "waiting");
}

TEST_CASE("run history: a turn's transitions are one commit, made before another connection writes and at the turn's end",
          "[store]") {
  GroupedHistory g;
  RunHistory& history = g.history;
  auto& io = g.io;
  const std::string& path = g.path;
  const int events_before = rows(path, "events");

  // Two transitions of one turn: nothing is committed until something asks for it.
  history.step_changed("r1", 0, 0, {{"state", "succeeded"}});
  history.step_changed("r1", 0, 1, {{"state", "running"}});
  CHECK(rows(path, "events") == events_before);
  // Another connection of the file writing on this thread: the group is committed first (it would otherwise
  // wait on its busy timeout for a commit only this thread can make, and fail).
  std::string error;
  sqlite3* side = open_side_connection(path, "a test table", {"CREATE TABLE IF NOT EXISTS side(x INTEGER)"}, error);
  REQUIRE(side);
  CHECK(rows(path, "events") == events_before + 2);
  history.step_changed("r1", 0, 2, {{"state", "waiting"}});
  CHECK(side_transaction(side, error, "side", [&] { sqlite_exec(side, "INSERT INTO side VALUES(1)"); }));
  INFO(error);
  CHECK(rows(path, "events") == events_before + 3);
  CHECK(rows(path, "side") == 1);
  sqlite3_close(side);

  // What is left open is committed when the turn ends (or by durable(), before a step starts).
  history.step_changed("r1", 0, 3, {{"state", "waiting"}});
  CHECK(rows(path, "events") == events_before + 3);
  io.poll();
  CHECK(rows(path, "events") == events_before + 4);
  history.step_changed("r1", 0, 4, {{"state", "running"}});
  history.durable();
  CHECK(rows(path, "events") == events_before + 5);
  CHECK(g.failed.empty());
}

TEST_CASE("run history: learned durations are written at a run's end and a batch at a time, not in each step's commit",
          "[store]") {
  GroupedHistory g;
  RunHistory& history = g.history;
  const std::string& path = g.path;
  history.step_changed("r1", 0, 0, {{"state", "succeeded"}});
  history.record_duration("key-a", 1.5, "2026-12-05T00:00:00Z");
  history.durable();  // the step's commit: its transition, not the duration
  CHECK(rows(path, "events") >= 1);
  CHECK(rows(path, "step_durations") == 0);
  // A batch full is written at once, each key pruned to its newest kKeptDurations.
  for (std::size_t i = 1; i < RunHistory::kDurationBatch; ++i)
    history.record_duration("key-b", static_cast<double>(i), "2026-12-05T00:00:" + std::string(i < 10 ? "0" : "") + std::to_string(i % 60) + "Z");
  CHECK(rows(path, "step_durations") == 1 + Journal::kKeptDurations);
  // At a run's end, what its steps took is there for the next run's estimates.
  history.record_duration("key-a", 2.5, "2026-12-05T00:01:00Z");
  CHECK(rows(path, "step_durations") == 1 + Journal::kKeptDurations);
  history.run_finished("r1", "succeeded", 0, {{"id", "r1"}, {"state", "succeeded"}, {"jobs", nlohmann::json::array()}});
  CHECK(history.journal().durations("key-a") == std::vector<double>{2.5, 1.5});
}

TEST_CASE("run reporter: a run's head is written once a group, as the group's commit finds it, or when its engine goes first",
          "[store]") {
  GroupedHistory g;
  RunHistory& history = g.history;
  const std::string main_ref = "main";
  RunReporter reporter(history, g.model.metrics, main_ref, false, [](const std::string&) -> const nlohmann::json* { return nullptr; }, [] {});
  reporter.set_keep_engine_state(true);
  Plan p;
  p.jobs.resize(1);
  p.jobs[0].id = "j";
  p.jobs[0].steps.resize(2);
  auto record = [](const std::string& id) {
    RunRecord r;
    r.id = id;
    r.jobs.resize(1);
    r.jobs[0].steps.resize(2);
    return r;
  };
  RunRecord r = record("r1");
  r.jobs[0].steps[0].state = StepState::Waiting;
  reporter.step_changed(r, p, 0, 0);
  r.jobs[0].state = JobState::Running;
  r.jobs[0].steps[1].state = StepState::Waiting;
  reporter.step_changed(r, p, 0, 1);
  // Within the turn the steps' rows are written and the head is not: it waits for the group's commit.
  CHECK_FALSE(history.engine_state("r1"));
  g.io.poll();
  auto kept = history.engine_state("r1");
  REQUIRE(kept);
  CHECK((*kept)["jobs"][0]["state"] == "running");  // the head as the commit found it
  CHECK((*kept)["jobs"][0]["steps"][1]["state"] == "waiting");

  // A run whose engine goes before its group's commit: its head is written then, from the record still there.
  {
    RunRecord gone = record("r2");
    gone.jobs[0].steps[0].state = StepState::Waiting;
    reporter.step_changed(gone, p, 0, 0);
    gone.jobs[0].state = JobState::Running;
    reporter.run_gone(gone);
  }
  history.durable();
  auto kept_gone = history.engine_state("r2");
  REQUIRE(kept_gone);
  CHECK((*kept_gone)["jobs"][0]["state"] == "running");
}
