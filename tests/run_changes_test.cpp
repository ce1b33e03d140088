// A run's changes since a client last looked (server/run_changes, commands/run_mirror): GET
// /api/v1/runs/{id}?since=REVISION carries what changed, and `submit --wait` merges it into the run it shows.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "commands/run_follower.h"
#include "commands/run_mirror.h"
#include "served_daemon.h"
#include "server/run_changes.h"
#include "util/state_paths.h"

using namespace pto;
using namespace pto::test;

namespace {

json step_json(const std::string& id, const std::string& state) { return {{"id", id}, {"name", id}, {"state", state}}; }

std::set<std::string> step_ids(const json& run) {
  std::set<std::string> ids;
  for (const auto& j : run["jobs"])
    for (const auto& s : j["steps"]) ids.insert(s["id"].get<std::string>());
  return ids;
}

}  // namespace

TEST_CASE("run changes: a revision reads back as written, anything else is refused", "[run_changes]") {
  const RunRevision r{0xa5d511cb6a418d8aULL, 1040, 8};
  CHECK(r.text() == "a5d511cb6a418d8a-1040-8");
  auto back = RunRevision::parse(r.text());
  REQUIRE(back);
  CHECK(back->epoch == r.epoch);
  CHECK(back->number == 1040);
  CHECK(back->generation == 8);
  for (const char* bad : {"", "1-2-3", "a5d511cb6a418d8a-1040", "a5d511cb6a418d8a-x-8", "a5d511cb6a418d8a-1-8-9", "a5d511cb6a418d8g-1-8",
                          "a5d511cb6a418d8a--8", "a5d511cb6a418d8a-1-99999999999999999999999"})
    CHECK_FALSE(RunRevision::parse(bad));
}

TEST_CASE("run mirror: deltas merge into the whole run, a place in the queue lasts one answer, a delta that does not fit asks for the whole",
          "[run_changes]") {
  RunMirror m;
  CHECK(m.query().empty());
  json whole = {{"state", "running"}, {"revision", "00000000000000aa-3-1"},
                {"jobs", json::array({{{"id", "1"}, {"state", "running"}, {"steps", json::array({step_json("1-1", "running"),
                                                                                                  step_json("1-2", "waiting"),
                                                                                                  step_json("1-3", "waiting")})}}})}};
  whole["jobs"][0]["steps"][1]["queue"] = {{"position", 1}};
  REQUIRE(m.take(whole));
  CHECK_FALSE(m.merged());
  CHECK(m.changed() == nullptr);  // whole: any step may have changed
  CHECK(m.query() == "?since=00000000000000aa-3-1");

  // 1-1 ended, 1-2 started; 1-3 is first in the queue now. 1-2's old place is dropped with its change.
  json delta = {{"delta", true}, {"state", "running"}, {"revision", "00000000000000aa-5-2"},
                {"jobs", json::array({{{"id", "1"}, {"state", "running"}, {"steps", json::array({step_json("1-1", "succeeded"),
                                                                                                  step_json("1-2", "running"),
                                                                                                  step_json("1-3", "waiting")})}}})}};
  delta["jobs"][0]["steps"][2]["queue"] = {{"position", 1}};
  REQUIRE(m.take(delta));
  CHECK(m.merged());
  REQUIRE(m.changed());
  CHECK(*m.changed() == std::set<RunMirror::StepPlace>{{0, 0}, {0, 1}, {0, 2}});
  CHECK(m.queued() == std::set<RunMirror::StepPlace>{{0, 2}});
  CHECK(m.query() == "?since=00000000000000aa-5-2");
  const json& steps = m.run()["jobs"][0]["steps"];
  REQUIRE(steps.size() == 3);
  CHECK(steps[0]["state"] == "succeeded");
  CHECK(steps[1]["state"] == "running");
  CHECK_FALSE(steps[1].contains("queue"));
  CHECK(steps[2]["queue"]["position"] == 1);
  CHECK_FALSE(m.run().contains("delta"));

  // Nothing changed but the run's own fields: 1-3's place is not carried again, so it is not kept.
  json quiet = {{"delta", true}, {"state", "cancelling"}, {"revision", "00000000000000aa-5-3"},
                {"jobs", json::array({{{"id", "1"}, {"state", "running"}, {"steps", json::array()}}})}};
  REQUIRE(m.take(quiet));
  REQUIRE(m.changed());
  CHECK(m.changed()->empty());
  CHECK(m.run()["state"] == "cancelling");
  CHECK(m.run()["jobs"][0]["steps"].size() == 3);
  CHECK_FALSE(m.run()["jobs"][0]["steps"][2].contains("queue"));

  // A step the mirror has not got (another plan): not merged, and the next GET asks for the whole run.
  json alien = quiet;
  alien["jobs"][0]["steps"] = json::array({step_json("1-9", "running")});
  CHECK_FALSE(m.take(alien));
  CHECK(m.query().empty());
  CHECK(m.run()["jobs"][0]["steps"].size() == 3);
  CHECK_FALSE(m.take(json::parse("[1]")));
}

TEST_CASE("run follower: reading the steps a delta carried and those running says what reading every step says", "[run_changes]") {
  auto run_of = [](std::vector<json> steps) {
    for (auto& s : steps) s["cards"] = s["state"] == "running" || s["state"] == "succeeded" ? json::array({0}) : json::array();
    return json{{"state", "running"}, {"queue_total", 1},
                {"jobs", json::array({{{"id", "j"}, {"name", "j"}, {"state", "running"}, {"steps", steps}}})}};
  };
  json first = run_of({step_json("1-1", "running"), step_json("1-2", "running"), step_json("1-3", "waiting"), step_json("1-4", "pending")});
  first["jobs"][0]["steps"][2]["queue"] = {{"position", 1}, {"eta_seconds", 5.0}};
  // 1-1 ended, 1-4 queued; 1-2 runs on (not carried: it is read for its heartbeat), 1-3 keeps its place.
  json second = run_of({step_json("1-1", "succeeded"), step_json("1-2", "running"), step_json("1-3", "waiting"), step_json("1-4", "waiting")});
  second["jobs"][0]["steps"][2]["queue"] = {{"position", 1}, {"eta_seconds", 4.0}};
  const std::set<RunFollower::StepPlace> changed = {{0, 0}, {0, 3}}, queued = {{0, 2}};
  RunFollower::Options o;
  o.heartbeat_seconds = 0;  // every poll beats for a running step
  RunFollower every("http://127.0.0.1:9", "", "r", o), some("http://127.0.0.1:9", "", "r", o);
  bool done = false;
  json a = first, b = first;
  CHECK(every.poll(a, done) == some.poll(b, done));
  a = second, b = second;
  const std::string all = every.poll(a, done), part = some.poll(b, done, &changed, &queued);
  INFO(all);
  CHECK(all.find("<== j / 1-1: succeeded") != std::string::npos);
  CHECK(all.find("... j / 1-2: still running") != std::string::npos);
  CHECK(part == all);
}

TEST_CASE("GET /runs/{id}?since= carries the steps changed since and the first in the queue, another daemon's revision gets the whole run",
          "[daemon][run_changes]") {
  Served s;
  s.devices = "1";
  const std::string go = (s.dir.path() / "go").string();
  write_project(s.dir, {{"e.yml", "name: e\nparallel: true\nsteps:\n"
                                  "  - {name: a, devices: 1, run: 'while [ ! -e " + go + " ]; do sleep 0.05; done'}\n"
                                  "  - {name: b, devices: 1, run: 'while [ ! -e " + go + "2 ]; do sleep 0.05; done'}\n"
                                  "  - {name: c, devices: 1, run: 'true'}\n"}});
  s.start();
  const std::string id = s.submit_run();
  json whole;
  REQUIRE(wait_until([&] {
    whole = s.get(api_path::run(id));
    const json& st = whole["jobs"][0]["steps"];
    // The queue as refreshed after a started (the model is refreshed soon after a transition, not at once).
    return st[0]["state"] == "running" && st[1].contains("queue") && st[1]["queue"]["position"] == 1 && st[2].contains("queue");
  }, 20));
  CHECK_FALSE(whole.contains("delta"));
  CHECK(whole.contains("request"));
  const std::string r1 = whole["revision"];
  REQUIRE(RunRevision::parse(r1));

  // Nothing changed: only b, first in the queue, with its place.
  json d = s.get(api_path::run(id) + "?since=" + r1);
  INFO(d.dump(1));
  CHECK(d["delta"] == true);
  CHECK_FALSE(d.contains("request"));
  REQUIRE(d["jobs"].size() == 1);
  CHECK(step_ids(d) == std::set<std::string>{"1-2"});
  CHECK(d["jobs"][0]["steps"][0]["queue"]["position"] == 1);
  CHECK(d["progress"]["steps"] == 3);

  // a ends, b starts: both are carried with their new states, c (first in the queue now) with its place.
  std::ofstream(go) << "1";
  REQUIRE(wait_until([&] {
    const json st = s.get(api_path::run(id))["jobs"][0]["steps"];
    return st[1]["state"] == "running" && st[2].contains("queue") && st[2]["queue"]["position"] == 1;
  }, 20));
  d = s.get(api_path::run(id) + "?since=" + r1);
  INFO(d.dump(1));
  CHECK(d["delta"] == true);
  CHECK(step_ids(d) == std::set<std::string>{"1-1", "1-2", "1-3"});
  for (const auto& st : d["jobs"][0]["steps"]) {
    if (st["id"] == "1-1") CHECK(st["state"] == "succeeded");
    if (st["id"] == "1-2") CHECK(st["state"] == "running");
    if (st["id"] == "1-3") CHECK(st["queue"]["position"] == 1);
  }
  const std::string r2 = d["revision"];
  CHECK(RunRevision::parse(r2)->number > RunRevision::parse(r1)->number);
  // Since r2 only c's place: what changed before r2 is not sent again.
  CHECK(step_ids(s.get(api_path::run(id) + "?since=" + r2)) == std::set<std::string>{"1-3"});

  // A revision of another engine (a daemon before a restart), or one ahead of this one: the whole run.
  RunRevision other = *RunRevision::parse(r2);
  other.epoch ^= 1;
  json again = s.get(api_path::run(id) + "?since=" + other.text());
  CHECK_FALSE(again.contains("delta"));
  CHECK(step_ids(again).size() == 3);
  RunRevision ahead = *RunRevision::parse(r2);
  ahead.number += 1000;
  CHECK_FALSE(s.get(api_path::run(id) + "?since=" + ahead.text()).contains("delta"));
  // Not a revision: 400, naming the field.
  auto bad = api_request("GET", s.url(api_path::run(id) + "?since=12"));
  CHECK(bad.status == 400);
  CHECK(bad.body.find("since") != std::string::npos);

  std::ofstream(go + "2") << "1";
  s.wait_run(id);
  json ended = s.get(api_path::run(id) + "?since=" + r2);  // a finished run: its record, whole
  CHECK_FALSE(ended.contains("delta"));
  CHECK(ended["state"] == "succeeded");
  CHECK(step_ids(ended).size() == 3);
  // Just ended, it is answered from memory with its run.json's own text (read_model/finished_texts), byte for
  // byte, and so it is with the file gone.
  const std::string record = run_record(run_dir(s.state(), id));
  const std::string text = read_file(record);
  CHECK(api_request("GET", s.url(api_path::run(id))).body == text);
  fs::remove(record);
  CHECK(api_request("GET", s.url(api_path::run(id))).body == text);
}

TEST_CASE("GET /runs/{id}?wait= is held until the run ends or the seconds pass, whichever is first", "[daemon][run_changes]") {
  Served s;
  s.devices = "1";
  const std::string go = (s.dir.path() / "go").string();
  write_project(s.dir, {{"w.yml", "name: w\nsteps:\n  - {name: a, devices: 1, run: 'while [ ! -e " + go + " ]; do sleep 0.05; done'}\n"}});
  s.start();
  const std::string id = s.submit_run();
  REQUIRE(wait_until([&] { return s.get(api_path::run(id))["jobs"][0]["steps"][0]["state"] == "running"; }, 20));
  for (const char* bad : {"0", "61", "-1", "soon", ""}) {
    auto r = api_request("GET", s.url(api_path::run(id) + "?wait=" + bad));
    CHECK(r.status == 400);
    CHECK(r.body.find("wait") != std::string::npos);
  }
  // The run cannot end (its step waits for `go`): the answer comes when the seconds pass, as without `wait`.
  const std::string rev = s.get(api_path::run(id))["revision"];
  json held = s.get(api_path::run(id) + "?since=" + rev + "&wait=0.3");
  CHECK(held["delta"] == true);
  CHECK(held["state"] == "running");
  // Held for up to 30 s, it is answered by the run's end: the finished record, whole. (`go` comes half a second
  // after the GET is sent: a GET not held would be answered "running" before that.)
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::ofstream(go) << "1";
  });
  json ended = s.get(api_path::run(id) + "?since=" + rev + "&wait=30");
  release.join();
  CHECK_FALSE(ended.contains("delta"));
  CHECK(ended["state"] == "succeeded");
  // A finished run is answered at once, whatever the wait.
  CHECK(s.get(api_path::run(id) + "?wait=60")["state"] == "succeeded");
}

TEST_CASE("submit --wait follows a run by its changes: every step's end once, the summary whole", "[daemon][run_changes]") {
  Served s;
  s.devices = "2";
  std::string job = "name: many\nparallel: true\nsteps:\n";
  for (int i = 1; i <= 40; ++i) job += "  - {name: s" + std::to_string(i) + ", devices: 1, run: 'sleep 0.0" + std::to_string(i % 7) + "; true " + std::to_string(i) + "'}\n";
  write_project(s.dir, {{"many.yml", job}});
  s.start();
  const std::string summary = (s.dir.path() / "summary.md").string();
  CommandResult r = run_cli({"submit", "--server", s.url(), "--wait", "--poll-interval", "0.05"},
                            {{"PTO_RUNNER_TOKEN", s.token}, {"GITHUB_ACTIONS", "true"}, {"GITHUB_STEP_SUMMARY", summary}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string md = read_file(summary);
  INFO(md);
  for (int i = 1; i <= 40; ++i) {
    const std::string name = "many / s" + std::to_string(i);
    auto count = [&](const std::string& what) {
      std::size_t n = 0;
      for (std::size_t at = r.out.find(what); at != std::string::npos; at = r.out.find(what, at + 1)) ++n;
      return n;
    };
    CHECK(count("==> " + name + "  [cards ") <= 1);  // a step that started and ended between two polls: its end only
    CHECK(count("<== " + name + ": succeeded") == 1);
    CHECK(md.find("| s" + std::to_string(i) + " | succeeded | ") != std::string::npos);
    // The late ones waited through several polls: their first forecast came with a delta and is in the summary.
    if (i >= 20) CHECK(md.find("| s" + std::to_string(i) + " | succeeded | 0.") < md.find(" (expected ", md.find("| s" + std::to_string(i) + " |")));
  }
}
