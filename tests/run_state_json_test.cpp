// A run's state to JSON and back (engine/run_state_json), the record a daemon that starts again goes on from
// (issue 36): every field of every step, job and the run survives the round trip.
#include <catch2/catch.hpp>

#include "engine/run_state_json.h"

using namespace pto;

TEST_CASE("run state: a run's whole state survives JSON and back, and an older or damaged record gives defaults", "[engine]") {
  RunRecord r;
  r.id = "20261203-101500-abcd";
  r.created = "2026-12-03T10:15:00.000Z";
  r.cancelled = true;
  r.cancel_signal = 15;
  r.cancel_reason = "superseded by run X";
  r.superseded_by = "X";
  r.infrastructure_failure = true;
  r.infrastructure_problems = {"toolchain setup failed"};
  r.toolchain_env = {{"PTOAS_ROOT", "/opt/ptoas"}};
  JobRecord jr;
  jr.state = JobState::Running;
  jr.started = "2026-12-03T10:15:01.000Z";
  jr.started_at = 1.5;
  jr.failed = true;
  jr.next_step = 2;
  jr.first_unsettled = 1;
  jr.file_env = {{"A", "1"}};
  jr.path_prepend = {"/x/bin"};
  jr.outputs = {{"o", "v"}};
  StepRecord s;
  s.state = StepState::Running;
  s.attempt = 2;
  s.cards = {3, 4};
  s.node = "n1";
  s.executor_job = "48";
  s.created = "c", s.runnable = "r", s.started = "s", s.finished = "";
  s.runnable_at = 2, s.started_at = 3, s.queued_at = 2.5;
  s.exit_code = 1, s.signal = 9, s.timed_out = true;
  s.wait_reason = "queued for 2 cards";
  s.error = "e";
  s.log_path = "/state/runs/R/logs/1-j/1-s.log";
  s.intervals = {{3, 7, {3, 4}, 1}};
  FailureEvidence ev;
  ev.cause = FailureCause::Card;
  ev.reason = "507018";
  ev.matched_line = "aclrt 507018";
  ev.pattern = "507018";
  ev.cards = {3};
  s.failures = {{1, {3, 4}, ev, {"card 3 suspect"}, ""}};
  s.lease_failures = {{1, {5}, ev, {}, "L1"}};
  s.leased = {5};
  s.lease_markers = "PYPTO_EXEC_RESULT=INFRA device=5";
  s.charged = {3};
  s.cause = "card";
  s.verdict = "failed on card 3";
  s.avoid = {3};
  s.outputs = {{"k", "v"}};
  s.summary = "## done";
  TestCase c;
  c.id = "t.py::test_a";
  c.result = TestResult::Victim;
  c.duration = 1.25;
  c.cards = {3};
  c.cause = FailureCause::Card;
  c.message = "device stream failed";
  c.output = "captured";
  c.file = "t.py";
  c.line = 7;
  c.process = 2;
  c.victim_of = "t.py::test_0";
  s.tests = {c};
  s.tests_error = "";
  s.tests_rerun = true;
  s.test_leases = {{"t.py::test_a", {5}}};
  s.test_lease_faults = {{"t.py::test_a", "507018"}};
  s.control = {"b1", "R2", "passes", "passes on main at b1"};
  s.shard_tests = {"t.py::test_a"};
  s.shard_expected_seconds = 4.5;
  s.collected = 40, s.collected_unknown = 3;
  s.resolved = true;
  s.order = 17;
  jr.steps = {s, StepRecord{}};
  r.jobs = {jr};

  const nlohmann::json j = run_state_json(r);
  const RunRecord back = run_state_from_json(nlohmann::json::parse(j.dump()));
  CHECK(run_state_json(back) == j);
  // A fresh step is written as its state alone (a row per transition): every field it leaves out reads back as
  // the step's own default, which the round trip above checks for the fresh step beside.
  CHECK(step_state_json(StepRecord{}) == nlohmann::json{{"state", "pending"}});
  const StepRecord& b = back.jobs.at(0).steps.at(0);
  CHECK(b.state == StepState::Running);
  CHECK(b.cards == std::vector<int>{3, 4});
  CHECK(b.failures.at(0).evidence.cause == FailureCause::Card);
  CHECK(b.failures.at(0).evidence.matched_line == "aclrt 507018");
  CHECK(b.tests.at(0).output == "captured");
  CHECK(b.tests.at(0).victim_of == "t.py::test_0");
  CHECK(b.tests_summary.victims == 1);  // derived again from the cases
  CHECK(b.control.note == "passes on main at b1");
  CHECK(b.order == 17);
  CHECK(back.jobs.at(0).next_step == 2);
  CHECK(back.jobs.at(0).file_env.at("A") == "1");
  CHECK(back.toolchain_env.at("PTOAS_ROOT") == "/opt/ptoas");

  // An older daemon's record, or a damaged one: defaults, never a throw.
  const RunRecord odd = run_state_from_json(nlohmann::json::parse(R"({"id": 5, "jobs": [{"state": "nonsense", "steps": [{"attempt": "x",
      "cards": "y", "tests": [{"result": "maybe"}]}]}]})"));
  CHECK(odd.id.empty());
  REQUIRE(odd.jobs.size() == 1);
  CHECK(odd.jobs[0].state == JobState::Pending);
  CHECK(odd.jobs[0].steps.at(0).attempt == 0);
  CHECK(odd.jobs[0].steps.at(0).cards.empty());
  CHECK(odd.jobs[0].steps.at(0).tests.at(0).result == TestResult::Passed);
}

#include "exec/launch_json.h"
#include "util/secret_mask.h"

TEST_CASE("launch: a step's launch and outcome survive JSON and back, its masks with them, not its callbacks", "[engine]") {
  StepLaunch l;
  l.label = "j / s";
  l.command = "echo $SECRET";
  l.shell = "sh";
  l.working_directory = "/w";
  l.env = {"A=1", "SECRET=hunter22"};
  l.log_path = "/state/runs/R/logs/1-j/1-s.log";
  l.marker = "R/0/0/1";
  l.timeout_seconds = 90, l.grace_seconds = 3, l.log_max_bytes = 1 << 20;
  l.card_files = {"/dev/davinci3"};
  l.limits = {8192, 64u << 20, 4, true};
  l.devices = 2, l.device_type = "a5";
  l.run_as = RunAs{"pto-step3", 1003, 1003, {44}};
  l.mask = std::make_shared<SecretMask>();
  l.mask->add("hunter22");
  l.on_line = [](std::string_view) {};
  const StepLaunch b = launch_from_json(nlohmann::json::parse(launch_json(l).dump()));
  CHECK(launch_json(b) == launch_json(l));
  CHECK(b.run_as->groups == std::vector<gid_t>{44});
  CHECK(b.limits.memory_asked);
  REQUIRE(b.mask);
  CHECK(b.mask->apply("x hunter22 " + base64_encode("hunter22")) == "x *** ***");
  CHECK_FALSE(b.on_line);
  StepOutcome o;
  o.exit_code = 3, o.signal = 0, o.timed_out = true, o.limit_reached = "memory", o.pid = 77, o.survivors = "1 process";
  CHECK(outcome_json(outcome_from_json(outcome_json(o))) == outcome_json(o));
}
