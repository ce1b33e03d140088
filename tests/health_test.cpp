// Every red is true (issue 22): what a failure is charged to (engine/failure_evidence), the cards' health
// across runs (sched/device_pool), retries elsewhere, and the verdict, unit by unit and with a real daemon on
// fake cards: a "wedged" card is one whose marker file makes any step on it print
// `aclrtSynchronizeStream failed: 507018` and exit 1.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <thread>

#include "config/job_file.h"
#include "engine/failure_evidence.h"
#include "sched/device_pool.h"
#include "served_daemon.h"
#include "test_support.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;
using pto::FailureCause;

namespace {

pto::HealthConfig pypto_health() {
  TempDir t;
  auto f = t.write("runner.yml", "health:\n  infra-exit-codes: [99]\n  fault-patterns:\n"
                                 "    - {pattern: '507018', cause: card}\n"
                                 "    - {pattern: 'device fault reported: device_id=(\\d+)', cause: card, card-group: 1}\n"
                                 "    - {pattern: 'hccl timeout', cause: infra}\n");
  pto::Diagnostics d;
  auto cfg = pto::load_runner_config(f.string(), "runner.yml", d);
  REQUIRE_FALSE(d.has_errors());
  return cfg.health;
}

// runner.yml with pypto's card fault: any step printing 507018 failed by its card.
const char* const kCardFaultPattern = "health:\n  fault-patterns:\n    - {pattern: '507018', cause: card}\n";

// A directory where the fake cards' wedge markers and the steps' marks go.
fs::path marks_dir(const Served& s) {
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  return marks;
}

}  // namespace

TEST_CASE("failure evidence: fault patterns, harness markers, infra codes, timeouts and the code, each with its evidence", "[health]") {
  const auto h = pypto_health();
  auto of = [&](const std::string& log, int exit = 1, std::vector<int> cards = {3}, bool timed_out = false) {
    return pto::classify_failure({exit, 0, timed_out, false, cards}, h, log);
  };
  auto e = of("running case 7\naclrtSynchronizeStream failed: 507018\n");
  CHECK(e.cause == FailureCause::Card);
  CHECK(e.cards == std::vector<int>{3});
  CHECK(e.pattern == "507018");
  CHECK(e.matched_line == "aclrtSynchronizeStream failed: 507018");
  // The card the line names, not the step's.
  e = of("[ERROR] device fault reported: device_id=4, not attributed to any run\n", 1, {1});
  CHECK(e.cause == FailureCause::Card);
  CHECK(e.cards == std::vector<int>{4});
  CHECK(of("hccl timeout after 1800s\n").cause == FailureCause::Infra);
  // Harness markers: failed cases on card 2 only, cases on 1 and 3 passed: card 2's.
  e = of("PYPTO_EXEC_RESULT=PASS device=1\nPYPTO_EXEC_RESULT=FAIL device=2\nPYPTO_EXEC_RESULT=PASS device=3\n"
         "PYPTO_EXEC_RESULT=FAIL device=2\n", 1, {});
  CHECK(e.cause == FailureCause::Card);
  CHECK(e.cards == std::vector<int>{2});
  CHECK(e.reason.find("2 failed case(s), all on card 2") != std::string::npos);
  // Failed cases on every card the cases ran on: the commit's.
  CHECK(of("PYPTO_EXEC_RESULT=FAIL device=1\nPYPTO_EXEC_RESULT=FAIL device=2\n", 1, {}).cause == FailureCause::Code);
  e = of("PYPTO_EXEC_RESULT=INFRA device=5\n", 1, {});
  CHECK(e.cause == FailureCause::Infra);
  CHECK(e.cards == std::vector<int>{5});
  e = of("", 99);
  CHECK(e.cause == FailureCause::Infra);
  CHECK(e.reason == "exit 99 is in health.infra-exit-codes");
  CHECK(of("507018", 1, {3}, true).cause == FailureCause::Timeout);
  e = of("AssertionError: mismatch\n");
  CHECK(e.cause == FailureCause::Code);
  CHECK(e.reason == "exit 1");
  CHECK(e.cards.empty());
}

TEST_CASE("retry policy: by default card and infra failures run once more elsewhere, the code's never, and retry.on says which", "[health]") {
  pto::RetryPolicy none;  // no `retry:`
  CHECK(none.retries(FailureCause::Card, 1));
  CHECK(none.retries(FailureCause::Infra, 1));
  CHECK_FALSE(none.retries(FailureCause::Card, 2));
  CHECK_FALSE(none.retries(FailureCause::Code, 1));
  CHECK_FALSE(none.retries(FailureCause::Timeout, 1));
  TempDir t;
  auto f = t.write("j.yml", "name: j\nsteps:\n  - {name: a, run: 'true', retry: {max: 2}}\n  - {name: b, run: 'true', retry: {max: 3, on: [card]}}\n"
                            "  - {name: c, run: 'true', retry: {max: 1, on: [code]}}\n");
  pto::Diagnostics d;
  auto job = pto::load_job_file(f.string(), "jobs/j.yml", "j", d);
  REQUIRE(job.steps.size() == 3);
  CHECK(job.steps[0].retry.retries(FailureCause::Code, 2));  // `max` alone: any failure, as before causes
  CHECK_FALSE(job.steps[0].retry.retries(FailureCause::Code, 3));
  CHECK(job.steps[1].retry.retries(FailureCause::Card, 3));
  CHECK_FALSE(job.steps[1].retry.retries(FailureCause::Infra, 1));
  REQUIRE(d.has_errors());
  CHECK(d.items()[0].message.find("retry: 'on' lists causes to retry: card, infra, flaky") != std::string::npos);
}

TEST_CASE("card health: suspect after a charge, bad (drained with its evidence) after charges from two runs, at most max-auto-drained, kept across a restart, a person's drain is maintenance",
          "[health]") {
  TempDir dir;
  pto::RunnerConfig cfg;
  cfg.device_ids = {0, 1, 2, 3};
  cfg.lock_dir = (dir.path() / "locks").string();
  cfg.health.max_auto_drained = 1;
  auto pool = std::make_unique<pto::DevicePool>(cfg, (dir.path() / "state").string());
  REQUIRE(pool->init().empty());
  const double t = 1.8e9;
  CHECK(pool->charge(3, "run-a", "507018", t) == "card 3 suspect (1 failure in 1 run; 507018)");
  CHECK(pool->charge(3, "run-a", "507018", t + 30) == "card 3 suspect (2 failures in 1 run in 1 min; 507018)");
  CHECK_FALSE(pool->is_drained(3));
  CHECK(pool->failing_elsewhere(3, "run-b", t + 40).find("card 3 failed 1 other run's work") != std::string::npos);
  CHECK(pool->failing_elsewhere(3, "run-a", t + 40).empty());  // its own failures are not evidence against it
  CHECK(pool->charge(3, "run-b", "507018", t + 240) == "card 3 drained (3 failures in 2 runs in 4 min; 507018)");
  CHECK(pool->is_drained(3));
  // A second card with the same evidence: max-auto-drained (1) is reached, it stays in service, suspect.
  pool->charge(2, "run-a", "507018", t);
  CHECK(pool->charge(2, "run-c", "507018", t + 60).find("not drained: health.max-auto-drained (1)") != std::string::npos);
  CHECK_FALSE(pool->is_drained(2));
  pool->drain(1, "reseating the card");
  auto status = pool->status();
  CHECK(to_string(status[3].health) == "bad");
  CHECK(status[3].evidence.size() == 3);
  CHECK(status[3].evidence.back() == "run-b: 507018");
  CHECK(to_string(status[2].health) == "suspect");
  CHECK(to_string(status[1].health) == "maintenance");
  CHECK(to_string(status[0].health) == "good");
  // A restart keeps who is bad, why, and the person's drain.
  pool = std::make_unique<pto::DevicePool>(cfg, (dir.path() / "state").string());
  REQUIRE(pool->init().empty());
  status = pool->status();
  CHECK(to_string(status[3].health) == "bad");
  CHECK(status[3].evidence.size() == 3);
  CHECK(to_string(status[1].health) == "maintenance");
  // Charges age out of the window: a suspect card with none left is good again; an undrained card is good.
  CHECK(pool->charge(0, "run-d", "507018", t).find("suspect") != std::string::npos);
  CHECK(pool->charge(0, "run-e", "x", t + 2 * 3600).find("card 0 suspect (1 failure in 1 run; x)") != std::string::npos);
  CHECK(pool->undrain(3));
  CHECK(to_string(pool->status()[3].health) == "good");
}

TEST_CASE("card health: a card that goes bad health.retire-after times though its probes pass is retired: never probed again, kept across a restart, back only by a person",
          "[health]") {
  TempDir dir;
  pto::RunnerConfig cfg;
  cfg.device_ids = {0, 1};
  cfg.lock_dir = (dir.path() / "locks").string();
  cfg.health.return_after = 1;
  cfg.health.retire_after = 3;
  auto pool = std::make_unique<pto::DevicePool>(cfg, (dir.path() / "state").string());
  REQUIRE(pool->init().empty());
  double t = 1.8e9;
  auto go_bad = [&](int spell) {
    pool->charge(1, "run-a" + std::to_string(spell), "507018", t);
    return pool->charge(1, "run-b" + std::to_string(spell), "507018", t + 10);
  };
  for (int spell = 1; spell <= 2; ++spell) {
    CHECK(go_bad(spell).find("card 1 drained (") == 0);
    CHECK(to_string(pool->status()[1].health) == "bad");
    REQUIRE(pool->idle_bad_cards() == std::vector<int>{1});
    pool->probe_started(1);
    CHECK(pool->probe_ended(1, true));  // back in service after its passing probe
    CHECK(to_string(pool->status()[1].health) == "good");
    t += 600;
  }
  CHECK(go_bad(3).find("card 1 retired (") == 0);
  auto st = pool->status()[1];
  CHECK(to_string(st.health) == "retired");
  CHECK(st.drain_reason.find("retired: bad 3 times in 7 days (health.retire-after 3)") == 0);
  CHECK(pool->idle_bad_cards().empty());  // the prober leaves it alone
  CHECK(pool->is_drained(1));
  // A restart keeps it retired; a person's undrain returns it, with a clean slate.
  pool = std::make_unique<pto::DevicePool>(cfg, (dir.path() / "state").string());
  REQUIRE(pool->init().empty());
  CHECK(to_string(pool->status()[1].health) == "retired");
  CHECK(pool->undrain(1));
  CHECK(to_string(pool->status()[1].health) == "good");
  CHECK(go_bad(4).find("card 1 drained (") == 0);  // its spells start over: bad, not retired
}

TEST_CASE("every red is true: card 3 wedges while 20 runs of a 6-step job go through 8 cards: no run is red, card 3 is bad after failures from two runs and gets no more work, the verdict says so",
          "[health]") {
  Served s;
  s.devices = "0-7";
  const fs::path marks = marks_dir(s);
  s.dir.write("runner.yml", kCardFaultPattern);
  std::string job = "name: six\nparallel: true\nsteps:\n";
  for (int i = 0; i < 6; ++i)
    job += "  - {name: case-" + std::to_string(i) + ", devices: 1, run: 'if [ -e " + marks.string() +
           "/wedged-$TASK_DEVICE ]; then echo \"aclrtSynchronizeStream failed: 507018\"; exit 1; fi; sleep 0.2; : " + std::to_string(i) + "'}\n";
  write_project(s.dir, {{"six.yml", job}});
  std::ofstream(marks / "wedged-3") << "1";
  s.start();
  std::vector<std::string> runs;
  for (int r = 0; r < 20; ++r) runs.push_back(s.submit_run({{"jobs", {"six"}}}));
  int failures_on_3 = 0, passed_on_3 = 0;
  std::string a_verdict;
  for (const auto& id : runs) {
    json run = s.wait_run(id, 120);
    INFO(run.dump(1).substr(0, 3000));
    CHECK(run["state"] == "succeeded");
    for (const auto& st : run["jobs"][0]["steps"]) {
      passed_on_3 += st["cards"] == json::array({3});
      for (const auto& f : st["failures"]) {
        failures_on_3 += f["ran_on"] == json::array({3});
        CHECK(f["cause"] == "card");
      }
      if (st["verdict"].is_string()) {
        a_verdict = st["verdict"];
        CHECK(st["cause"] == "card");
      }
    }
  }
  CHECK(passed_on_3 == 0);
  CHECK(failures_on_3 >= 2);
  // Drained once two runs' failures are charged: at worst every step of one run, then one of another's.
  CHECK(failures_on_3 <= 7);
  INFO(a_verdict);
  CHECK(a_verdict.find("failed on card 3, passed on card ") == 0);
  CHECK(a_verdict.find(": card 3 ") != std::string::npos);
  const json st = s.get(api_path::kStatus);
  const json& card3 = st["devices"][3];
  CHECK(card3["state"] == "drained");
  CHECK(card3["health"]["state"] == "bad");
  std::set<std::string> evidence_runs;
  for (const auto& e : card3["health"]["evidence"]) {
    const std::string line = e;
    CHECK(line.find(": 507018") != std::string::npos);
    evidence_runs.insert(line.substr(0, line.find(':')));
  }
  CHECK(evidence_runs.size() >= 2);
  for (int c : {0, 1, 2, 4, 5, 6, 7}) CHECK(st["devices"][c]["health"]["state"] == "good");
  const std::string metrics = pto::api_request("GET", s.url(api_path::kMetrics)).body;
  CHECK(metrics.find("pto_runner_card_health{card=\"3\",state=\"bad\"} 1") != std::string::npos);
  CHECK(metrics.find("pto_runner_failures_total{cause=\"card\"} " + std::to_string(failures_on_3)) != std::string::npos);
  CHECK(metrics.find("pto_runner_retries_total{cause=\"card\"} " + std::to_string(failures_on_3)) != std::string::npos);
}

TEST_CASE("every red is true: a step that fails on every card stays red as the code's, is not retried elsewhere and marks no card, and one that fails once and passes on retry is flaky and green",
          "[health]") {
  Served s;
  s.devices = "0-3";
  const fs::path marks = marks_dir(s);
  s.dir.write("runner.yml", kCardFaultPattern);
  write_project(s.dir, {{"broken.yml", "name: broken\nsteps:\n  - {name: regression, devices: 1, run: 'echo AssertionError: 3 != 4; exit 1'}\n"},
                        {"flaky.yml", "name: flaky\nsteps:\n  - {name: sometimes, devices: 1, retry: {max: 1}, run: 'if [ ! -e " +
                                          marks.string() + "/once ]; then touch " + marks.string() + "/once; exit 1; fi'}\n"}});
  s.start();
  json red = s.wait_run(s.submit_run({{"jobs", {"broken"}}}));
  CHECK(red["state"] == "failed");
  const json& step = red["jobs"][0]["steps"][0];
  CHECK(step["attempt"] == 1);
  CHECK(step["cause"] == "code");
  REQUIRE(step["failures"].size() == 1);
  CHECK(step["failures"][0]["reason"] == "exit 1");
  CHECK(step["verdict"].get<std::string>().find(": code (exit 1)") != std::string::npos);
  // Again: a second run of the regression does not make its card the culprit.
  json again = s.wait_run(s.submit_run({{"jobs", {"broken"}}}));
  CHECK(again["jobs"][0]["steps"][0]["cause"] == "code");
  for (const auto& d : s.get(api_path::kStatus)["devices"]) CHECK(d["health"]["state"] == "good");

  json green = s.wait_run(s.submit_run({{"jobs", {"flaky"}}}));
  CHECK(green["state"] == "succeeded");
  const json& f = green["jobs"][0]["steps"][0];
  CHECK(f["cause"] == "flaky");
  CHECK(f["attempt"] == 2);
  CHECK(f["verdict"].get<std::string>().find("flaky (exit 1, then passed on the same commit)") != std::string::npos);
  // Elsewhere: the retry did not get the card the first attempt ran on.
  CHECK(f["failures"][0]["ran_on"] != f["cards"]);
  for (const auto& d : s.get(api_path::kStatus)["devices"]) CHECK(d["health"]["state"] == "good");
}

TEST_CASE("every red is true: a harness-style step whose cases fail only on card 2 charges card 2, not the commit, and is green on its retry",
          "[health]") {
  Served s;
  s.devices = "0-3";
  const fs::path marks = marks_dir(s);
  // The harness prints one marker per case; the first time, card 2's cases fail.
  write_project(s.dir, {{"harness.yml", "name: harness\nsteps:\n  - {name: system-tests, run: 'for d in 0 1 3; do echo PYPTO_EXEC_RESULT=PASS device=$d; done; "
                                        "if [ ! -e " + marks.string() + "/again ]; then touch " + marks.string() +
                                        "/again; echo PYPTO_EXEC_RESULT=FAIL device=2; echo PYPTO_EXEC_RESULT=FAIL device=2; exit 1; fi'}\n"}});
  s.start();
  json run = s.wait_run(s.submit_run({{"jobs", {"harness"}}}));
  INFO(run.dump(1).substr(0, 3000));
  CHECK(run["state"] == "succeeded");
  const json& st = run["jobs"][0]["steps"][0];
  CHECK(st["cause"] == "card");
  REQUIRE(st["failures"].size() == 1);
  CHECK(st["failures"][0]["cards"] == json::array({2}));
  CHECK(st["failures"][0]["reason"].get<std::string>().find("2 failed case(s), all on card 2") != std::string::npos);
  CHECK(s.get(api_path::kStatus)["devices"][2]["health"]["state"] == "suspect");
}

TEST_CASE("every red is true: a harness-style step that leases cards per batch (task-submit) and keeps their output to itself, whose cases fail only on card 2, charges card 2, not the commit, and its retry's leases keep off card 2",
          "[health]") {
  Served s;
  s.devices = "0-3";
  const fs::path marks = marks_dir(s);
  // One batch of three cases on the card it leased: card 2's cases fail (after the other batches passed),
  // the others pass. Its output goes to a file of the harness, never to the step's log.
  s.dir.write("batch.sh", "d=$1\necho $d >> " + (marks / "cards-used").string() + "\n"
                          "if [ \"$d\" = 2 ]; then sleep 2; for c in a b c; do echo \"PYPTO_EXEC_RESULT=FAIL device=$d case=$c\"; done; exit 1; fi\n"
                          "sleep 1; for c in a b c; do echo \"PYPTO_EXEC_RESULT=PASS device=$d case=$c\"; done\n");
  s.dir.write("harness.sh", "echo attempt >> " + (marks / "cards-used").string() + "\npids=\"\"\n"
                            "for b in 1 2 3 4; do task-submit --device-num 1 --run \"sh " + (s.dir.path() / "batch.sh").string() +
                            " {}\" > " + marks.string() + "/batch-$b.out 2>&1 & pids=\"$pids $!\"; done\n"
                            "failed=0; for p in $pids; do wait $p || failed=$((failed+1)); done\n"
                            "echo \"$failed of 4 batches failed\"; [ $failed = 0 ]\n");
  write_project(s.dir, {{"harness.yml", "name: harness\nsteps:\n  - {name: system-tests, run: 'sh " + (s.dir.path() / "harness.sh").string() + "'}\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"harness"}}});
  json run = s.wait_run(id, 120);
  INFO(run.dump(1).substr(0, 4000));
  CHECK(run["state"] == "succeeded");
  const json& st = run["jobs"][0]["steps"][0];
  CHECK(st["attempt"] == 2);
  CHECK(st["cause"] == "card");
  REQUIRE(st["failures"].size() == 1);
  CHECK(st["failures"][0]["cause"] == "card");
  CHECK(st["failures"][0]["cards"] == json::array({2}));
  CHECK(st["failures"][0]["reason"].get<std::string>().find("3 failed case(s), all on card 2") != std::string::npos);
  // The lease itself has its cause: its cases failed on card 2 while the other batches' passed.
  REQUIRE(st["lease_failures"].size() == 1);
  CHECK(st["lease_failures"][0]["cause"] == "card");
  CHECK(st["lease_failures"][0]["ran_on"] == json::array({2}));
  CHECK(st["lease_failures"][0]["lease"].get<std::string>().rfind("lease-", 0) == 0);
  CHECK(st["verdict"].get<std::string>().find("card 2 suspect") != std::string::npos);
  // The markers reached the daemon through the leases only: the step's own log has none.
  CHECK(read_file(st["log_path"].get<std::string>()).find("PYPTO_EXEC_RESULT") == std::string::npos);
  // The retry's leases never got card 2.
  const std::string used = read_file(marks / "cards-used");
  const std::string retry = used.substr(used.rfind("attempt\n") + 8);
  CHECK(used.find("attempt\n") != used.rfind("attempt\n"));
  CHECK(retry.find('2') == std::string::npos);
  CHECK(std::count(retry.begin(), retry.end(), '\n') == 4);
  // Card 2 charged once for the run, the others not at all: the commit is not to blame.
  const json devices = s.get(api_path::kStatus)["devices"];
  CHECK(devices[2]["health"]["state"] == "suspect");
  REQUIRE(devices[2]["health"]["evidence"].size() == 1);
  CHECK(devices[2]["health"]["evidence"][0].get<std::string>().rfind(id + ": ", 0) == 0);
  for (int c : {0, 1, 3}) CHECK(devices[c]["health"]["state"] == "good");
  // The cards page's history has the lease's failure on card 2.
  bool seen = false;
  const json history = s.get(api_path::kCards);
  for (const auto& e : history["events"])
    seen |= e["card"] == 2 && e["kind"] == "lease" && e["result"] == "failed" && e["detail"].get<std::string>().find("card (charged to this card)") == 0;
  CHECK(seen);
}

TEST_CASE("every red is true: a failing preflight on card 5 puts the step on another card, its attempt count unchanged, and charges card 5",
          "[health]") {
  Served s;
  s.devices = "5-6";
  s.dir.write("runner.yml", "health:\n  preflight: 'test {device} != 5'\n");
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - {name: s, devices: 1, run: 'echo on $TASK_DEVICE'}\n"}});
  s.start();
  json run = s.wait_run(s.submit_run({{"jobs", {"one"}}}));
  INFO(run.dump(1).substr(0, 2000));
  CHECK(run["state"] == "succeeded");
  const json& st = run["jobs"][0]["steps"][0];
  CHECK(st["cards"] == json::array({6}));
  CHECK(st["attempt"] == 1);
  CHECK(st["failures"].empty());
  const json status = s.get(api_path::kStatus);
  CHECK(status["devices"][0]["health"]["state"] == "suspect");
  CHECK(status["devices"][0]["health"]["evidence"][0].get<std::string>().find("preflight `test 5 != 5` exit 1") != std::string::npos);
}

TEST_CASE("every red is true: the wedge removed, a bad card is reset while idle, passes health.check the configured number of times and is good again, and a person's drain stays",
          "[health]") {
  Served s;
  s.devices = "0-3";
  const fs::path marks = marks_dir(s);
  s.dir.write("runner.yml", "health:\n  fault-patterns: [{pattern: '507018', cause: card}]\n  max-auto-drained: 1\n"
                            "  check: 'test ! -e " + marks.string() + "/wedged-{device}'\n  reset: 'echo reset >> " + marks.string() +
                            "/reset-{device}'\n  return-after: 2\n  probe-interval-seconds: 0.2\n");
  write_project(s.dir, {{"w.yml", "name: w\nsteps:\n  - {name: s, devices: 1, retry: {max: 0}, run: 'if [ -e " + marks.string() +
                                      "/wedged-$TASK_DEVICE ]; then echo 507018; exit 1; fi'}\n"}});
  for (int c = 0; c < 4; ++c) std::ofstream(marks / ("wedged-" + std::to_string(c))) << "1";
  s.start();
  // Two runs fail on card 0 (the lowest free): charged from two runs, it is bad and drained.
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["health"]["state"] != "suspect"; }, 10));
  json st = s.get(api_path::kStatus);
  CHECK((st["devices"][0]["health"]["state"] == "bad" || st["devices"][0]["health"]["state"] == "probing"));
  // At most max-auto-drained (1): the next card with the same evidence stays in service.
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  st = s.get(api_path::kStatus);
  CHECK(st["devices"][1]["state"] != "drained");
  CHECK(st["devices"][1]["health"]["state"] == "suspect");
  // A person drains card 3: maintenance.
  REQUIRE(s.post(api_path::device(3, "drain"), {{"reason", "reseating"}}).status == 200);
  // Probes fail while the wedge is there; removed, the card passes twice and is back.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(s.get(api_path::kStatus)["devices"][0]["state"] == "drained");
  fs::remove(marks / "wedged-0");
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["health"]["state"] == "good"; }, 20));
  st = s.get(api_path::kStatus);
  CHECK(st["devices"][0]["state"] != "drained");
  CHECK(read_file(marks / "reset-0") == "reset\n");  // reset once, while it was idle
  CHECK(st["devices"][3]["health"]["state"] == "maintenance");
  CHECK(st["devices"][3]["state"] == "drained");
  int passed = 0;
  const json history = s.get(api_path::kCards);
  for (const auto& e : history["events"]) passed += e["card"] == 0 && e["kind"] == "health-check" && e["result"] == "passed";
  CHECK(passed >= 2);
}
