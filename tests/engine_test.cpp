// RunEngine driven through its seams with fakes, as ninja's build_test drives its Builder with a fake command
// runner: a CardBroker whose grants the test hands out, an Executor whose steps end when the test says, a
// ManualClock the test moves, and a journal and an observer that record what they hear. No process, no flock,
// no real time: each test states an order of events and what the engine does, journals and notifies; every
// Harness checks at its end that the views heard exactly what the journal had, each transition after it.
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>

#include "config/project.h"
#include "engine/card_broker.h"
#include "engine/engine.h"
#include "engine/run_state_json.h"
#include "report/run_view.h"
#include "exec/executor.h"
#include "plan/plan.h"
#include "engine_fakes.h"
#include "test_support.h"
#include "util/manual_clock.h"

using namespace pto;
using namespace pto::test;
using nlohmann::json;

namespace {

/// What the journal was told, in order: a step's new state ("step J S state") or a job's end ("job J state").
struct RecordingJournal : RunJournal {
  std::vector<std::string> events;
  void step_changed(const RunRecord& r, const Plan&, int job, int step) override {
    events.push_back("step " + std::to_string(job) + " " + std::to_string(step) + " " + to_string(r.jobs[job].steps[step].state));
  }
  void job_finished(const RunRecord& r, const Plan&, int job) override {
    events.push_back("job " + std::to_string(job) + " " + to_string(r.jobs[job].state));
  }
  std::size_t kept = 0;  // events kept (durable) so far
  void durable() override { kept = events.size(); }
};

/// What the views were told, in order, in the journal's words, plus where each step came from.
struct RecordingObserver : RunObserver {
  std::vector<std::string> events;
  std::vector<std::string> froms;  // "J S from->to" for every step transition
  const RecordingJournal* journal = nullptr;
  std::size_t journal_lag = 0;  // transitions notified before the journal had them (must stay 0)
  void on_step_changed(const RunRecord& r, const Plan&, int job, int step, StepState from) override {
    std::string e = "step " + std::to_string(job) + " " + std::to_string(step) + " " + to_string(r.jobs[job].steps[step].state);
    if (journal && (journal->events.size() <= events.size() || journal->events[events.size()] != e)) ++journal_lag;
    events.push_back(e);
    froms.push_back(std::to_string(job) + " " + std::to_string(step) + " " + to_string(from) + "->" +
                    to_string(r.jobs[job].steps[step].state));
  }
  void on_job_finished(const RunRecord& r, const Plan&, int job) override {
    std::string e = "job " + std::to_string(job) + " " + to_string(r.jobs[job].state);
    if (journal && (journal->events.size() <= events.size() || journal->events[events.size()] != e)) ++journal_lag;
    events.push_back(e);
  }
};

using Jobs = std::map<std::string, std::string>;

struct Harness {
  TempDir dir;
  boost::asio::io_context io;
  ManualClock clock;
  FakeBroker broker;
  FakeExecutor executor;
  RecordingJournal journal;
  RecordingObserver observer;
  std::unique_ptr<RunEngine> engine;
  EngineOptions options;  // what the engine was given (a take-over's engine gets the same)

  /// One job file, or several: {"a.yml": "...", "b.yml": "..."}.
  explicit Harness(const std::string& job, const std::string& runner_yml = "", bool executor_places = false)
      : Harness(Jobs{{"j.yml", job}}, runner_yml, executor_places) {}
  /// `tune`: changes the engine's options before it starts (e.g. an offload the test runs by hand).
  /// `before_start`: what the engine is told before it starts (e.g. its inputs' trees).
  Harness(const Jobs& jobs, const std::string& runner_yml = "", bool executor_places = false,
          const std::function<void(EngineOptions&)>& tune = nullptr, const std::function<void(RunEngine&)>& before_start = nullptr) {
    executor.places_steps = executor_places;
    executor.before_effect = [this] { unkept_effects += journal.kept != journal.events.size(); };
    observer.journal = &journal;
    write_project(dir, jobs);
    if (!runner_yml.empty()) dir.write("runner.yml", runner_yml);
    LoadOptions lo;
    lo.root = dir.str();
    Diagnostics d;
    Project project = load_project(lo, d);
    Plan plan = build_plan(project, PlanOptions{}, d);
    std::string first = d.items().empty() ? std::string() : format_diagnostic(d.items()[0]);
    INFO(first);
    REQUIRE_FALSE(d.has_input_errors());
    EngineOptions eo = make_engine_options(project.root, (dir.path() / "state").string(), project.runner, false, 1, InheritedEnv::AllButOurs);
    if (tune) tune(eo);
    options = eo;
    engine = std::make_unique<RunEngine>(EngineSeams{io, clock, broker, executor, &observer, &journal}, std::move(plan), std::move(eo));
    if (before_start) before_start(*engine);
    engine->start();
    settle();
  }
  ~Harness() {
    // Every transition the views heard of, the journal had heard of first, and nothing else.
    CHECK(observer.journal_lag == 0);
    CHECK(observer.events == journal.events);
    // No process started or was signalled while a transition before it was journaled but not yet kept.
    CHECK(unkept_effects == 0);
  }
  std::size_t unkept_effects = 0;
  void settle() {
    io.restart();
    io.poll();
  }
  /// Moves the engine's clock (timers fire), then lets posted work run.
  void advance(double seconds) {
    clock.advance(seconds);
    settle();
  }
  StepState state(int job, int step) const { return engine->record().jobs[job].steps[step].state; }
  /// Job index by name (the plan orders jobs by dependencies, not by file).
  int job(const std::string& name) const {
    const auto& jobs = engine->plan().jobs;
    for (std::size_t i = 0; i < jobs.size(); ++i)
      if (jobs[i].id == name) return static_cast<int>(i);
    FAIL("no job " << name);
    return -1;
  }
  /// The journal's events about one job's steps and its end, in order ("S state" / "job state").
  std::vector<std::string> journaled(int j) const {
    std::vector<std::string> out;
    const std::string step = "step " + std::to_string(j) + " ", end = "job " + std::to_string(j) + " ";
    for (const auto& e : journal.events) {
      if (e.rfind(step, 0) == 0) out.push_back(e.substr(step.size()));
      else if (e.rfind(end, 0) == 0) out.push_back("job " + e.substr(end.size()));
    }
    return out;
  }
  /// Writes what the launched step `i` hands back through one of its files (GITHUB_OUTPUT, GITHUB_ENV, ...).
  void step_writes(std::size_t i, const std::string& var, const std::string& text) {
    std::string path = executor.env(i, var);
    REQUIRE_FALSE(path.empty());
    std::ofstream(path, std::ios::app) << text;
  }
};

using Events = std::vector<std::string>;

/// The engine's offload (EngineOptions::offload) run by hand: what it was given to do elsewhere, done when the
/// test says, its answer then back on the engine's thread.
struct Offloads {
  std::vector<std::pair<std::function<void()>, std::function<void()>>> queued;
  std::function<void(EngineOptions&)> tune() {
    return [this](EngineOptions& eo) {
      eo.offload = [this](std::function<void()> work, std::function<void()> then) { queued.emplace_back(std::move(work), std::move(then)); };
    };
  }
  void run(std::size_t i) {
    queued.at(i).first();
    queued.at(i).second();
  }
};

}  // namespace

TEST_CASE("engine (fake broker): a step starts only once granted, on its cards, and returns them after it ends", "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: s, devices: 2, run: 'true'}\n");
  REQUIRE(h.broker.waiting.size() == 1);
  CHECK(h.broker.waiting.begin()->second.req.devices == 2);
  CHECK(h.broker.waiting.begin()->second.req.label == "j / s");
  CHECK(h.executor.launched.empty());  // nothing runs before the grant
  CHECK(h.state(0, 0) == StepState::Waiting);
  h.broker.grant_first({4, 5});
  h.settle();
  REQUIRE(h.executor.launched.size() == 1);
  CHECK(h.executor.env(0, "TASK_DEVICE") == "4,5");
  CHECK(h.executor.env(0, "DEVICE_ID") == "4");
  CHECK(h.broker.released.empty());  // held while the step runs
  h.executor.finish(1, 0);
  h.settle();
  CHECK(h.broker.released == std::vector<std::vector<int>>{{4, 5}});
  REQUIRE(h.broker.outcomes.size() == 1);
  CHECK_FALSE(h.broker.outcomes[0].second);
  CHECK(h.engine->finished());
  CHECK(h.engine->result() == ExitCode::Success);
}

TEST_CASE("engine (fake broker): a step no card can ever serve fails as an infrastructure failure, exit 3", "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: big, devices: 2, run: 'true'}\n  - {name: after, run: 'true'}\n");
  h.broker.refuse_first("needs 2 cards but only 1 usable");
  h.settle();
  CHECK(h.state(0, 0) == StepState::Failed);
  CHECK(h.engine->record().jobs[0].steps[0].error.find("needs 2 cards") != std::string::npos);
  CHECK(h.executor.launched.empty());
  CHECK(h.engine->finished());
  CHECK(h.engine->result() == ExitCode::Infrastructure);
}

TEST_CASE("engine (fake broker): an infrastructure exit code is reported to the broker as the card's fault", "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: s, devices: 1, retry: {max: 0}, run: 'true'}\n", "health:\n  infra-exit-codes: [77]\n");
  h.broker.grant_first({3});
  h.settle();
  h.executor.finish(1, 77);
  h.settle();
  REQUIRE(h.broker.outcomes.size() == 1);
  CHECK(h.broker.outcomes[0].first == std::vector<int>{3});
  CHECK(h.broker.outcomes[0].second);  // the card's fault: counted towards draining it
  CHECK(h.broker.released == std::vector<std::vector<int>>{{3}});
  CHECK(h.engine->result() == ExitCode::Failure);  // the step failed; the card, not the run, carries the count
}

TEST_CASE("engine (fake broker): cancel withdraws what waits and stops what runs, cards come back after it ends", "[engine]") {
  Harness h("name: j\nparallel: true\nsteps:\n  - {name: a, devices: 1, run: 'sleep 1 # a'}\n  - {name: b, devices: 1, run: 'sleep 1 # b'}\n");
  REQUIRE(h.broker.waiting.size() == 2);
  h.broker.grant_first({0});
  h.settle();
  REQUIRE(h.executor.launched.size() == 1);
  h.engine->cancel(0);
  h.settle();
  CHECK(h.broker.withdrawn.size() == 1);  // b never got cards
  CHECK(h.executor.cancelled == std::vector<std::uint64_t>{1});
  CHECK(h.broker.released == std::vector<std::vector<int>>{{0}});
  CHECK(h.engine->finished());
  CHECK(h.state(0, 1) == StepState::Cancelled);
}

TEST_CASE("engine (executor places): a step waits with the executor's reason until placed, runs on the cards it "
          "reports, and gives the broker nothing back", "[engine]") {
  Harness h("name: j\nparallel: true\nsteps:\n  - {name: a, devices: 2, run: 'true # a'}\n  - {name: b, devices: 1, run: 'true # b'}\n",
            "", /*executor_places=*/true);
  h.broker.grant_first({});  // a Slurm-like broker admits at once, with no cards of its own
  h.broker.grant_first({});
  h.settle();
  REQUIRE(h.executor.launched.size() == 2);
  CHECK(h.executor.launched[0].devices == 2);
  CHECK(h.executor.env(0, "TASK_DEVICE").empty());  // set in the job, from what Slurm allocated
  CHECK(h.state(0, 0) == StepState::Waiting);
  h.executor.launched[0].on_waiting("Slurm: Resources (job 7)");
  CHECK(h.engine->record().jobs[0].steps[0].wait_reason == "Slurm: Resources (job 7)");
  h.executor.running[1].launch.on_placed({"node1", {2, 3}, "7"});
  const StepRecord& a = h.engine->record().jobs[0].steps[0];
  CHECK(a.state == StepState::Running);
  CHECK(a.cards == std::vector<int>{2, 3});
  CHECK(a.node == "node1");
  CHECK(a.executor_job == "7");
  h.executor.finish(1, 0);
  h.settle();
  CHECK(h.state(0, 0) == StepState::Succeeded);
  CHECK(h.broker.released.empty());  // Slurm's cards, never the broker's
  // b is still in the cluster's queue: cancelling the run asks the executor to end it.
  CHECK(h.state(0, 1) == StepState::Waiting);
  h.engine->cancel(0);
  h.settle();
  CHECK(h.executor.cancelled == std::vector<std::uint64_t>{2});
  CHECK(h.state(0, 1) == StepState::Cancelled);
  CHECK(h.engine->finished());
}

// --- Every transition through one function: journaled, then notified (the Harness checks both at its end) ---

TEST_CASE("engine (fake clock): a failed attempt is re-queued in its old place, journaled as running -> waiting, and "
          "the retry runs on the cards it is granted", "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: s, devices: 1, run: 'true', retry: {max: 1}}\n");
  h.broker.grant_first({2});
  h.settle();
  h.executor.finish(1, 1);
  h.settle();
  CHECK(h.state(0, 0) == StepState::Waiting);
  CHECK(h.broker.released == std::vector<std::vector<int>>{{2}});
  REQUIRE(h.broker.waiting.size() == 1);
  CHECK(h.broker.waiting.begin()->second.req.order == 1);  // the first request's place in line
  h.broker.grant_first({3});
  h.settle();
  h.executor.finish(2, 0);
  h.settle();
  const StepRecord& s = h.engine->record().jobs[0].steps[0];
  CHECK(s.state == StepState::Succeeded);
  CHECK(s.attempt == 2);
  REQUIRE(s.intervals.size() == 2);
  CHECK(s.intervals[0].cards == std::vector<int>{2});
  CHECK(s.intervals[1].cards == std::vector<int>{3});
  CHECK(h.journaled(0) == Events{"0 waiting", "0 running", "0 waiting", "0 running", "0 succeeded", "job succeeded"});
  CHECK(std::count(h.observer.froms.begin(), h.observer.froms.end(), "0 0 running->waiting") == 1);
  CHECK(h.engine->result() == ExitCode::Success);
}

TEST_CASE("engine (fake clock): cancelling a run whose retry waits for cards withdraws it and journals and notifies "
          "its end", "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: s, devices: 1, run: 'true', retry: {max: 2}}\n");
  h.broker.grant_first({1});
  h.settle();
  h.executor.finish(1, 1);
  h.settle();
  REQUIRE(h.state(0, 0) == StepState::Waiting);
  const std::uint64_t retry_ticket = h.broker.waiting.begin()->first;
  h.engine->cancel(0);
  h.settle();
  CHECK(h.broker.withdrawn == std::vector<std::uint64_t>{retry_ticket});
  CHECK(h.state(0, 0) == StepState::Cancelled);
  CHECK(h.journaled(0) == Events{"0 waiting", "0 running", "0 waiting", "0 cancelled", "job cancelled"});
  CHECK(h.engine->finished());
}

TEST_CASE("engine (fake clock): timeout-minutes counts the wait for cards, so the run gets what is left of it", "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: s, devices: 1, timeout-minutes: 1, run: 'true'}\n");
  h.advance(40);
  h.broker.grant_first({0});
  h.settle();
  REQUIRE(h.executor.launched.size() == 1);
  CHECK(h.executor.launched[0].timeout_seconds == Approx(20));
  h.advance(100);  // the wait's timer was cancelled at the grant: nothing fires
  CHECK(h.state(0, 0) == StepState::Running);
  h.executor.finish(1, 0);
  h.settle();
  CHECK(h.journaled(0) == Events{"0 waiting", "0 running", "0 succeeded", "job succeeded"});
}

TEST_CASE("engine (fake clock): a wait past timeout-minutes or queue-timeout-minutes times out, withdrawn, naming "
          "the bound", "[engine]") {
  SECTION("timeout-minutes") {
    Harness h("name: j\nsteps:\n  - {name: s, devices: 1, timeout-minutes: 1, run: 'true'}\n");
    h.advance(59);
    CHECK(h.state(0, 0) == StepState::Waiting);
    h.advance(2);
    CHECK(h.state(0, 0) == StepState::TimedOut);
    CHECK(h.broker.withdrawn == std::vector<std::uint64_t>{1});
    CHECK(h.engine->record().jobs[0].steps[0].error.find("(timeout-minutes)") != std::string::npos);
    CHECK(h.journaled(0) == Events{"0 waiting", "0 timed_out", "job failed"});
    CHECK(h.engine->result() == ExitCode::Failure);
  }
  SECTION("queue-timeout-minutes") {
    Harness h("name: j\nsteps:\n  - {name: s, devices: 1, timeout-minutes: 10, queue-timeout-minutes: 0.5, run: 'true'}\n");
    h.advance(31);
    CHECK(h.state(0, 0) == StepState::TimedOut);
    CHECK(h.engine->record().jobs[0].steps[0].error.find("(queue-timeout-minutes)") != std::string::npos);
    CHECK(h.journaled(0) == Events{"0 waiting", "0 timed_out", "job failed"});
  }
}

TEST_CASE("engine (fake clock): run-timeout-minutes bounds the run from its start, within what timeout-minutes left",
          "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: a, devices: 1, timeout-minutes: 10, run-timeout-minutes: 2, run: 'a'}\n"
            "  - {name: b, devices: 1, timeout-minutes: 3, run-timeout-minutes: 2, run: 'b'}\n");
  h.advance(60);
  h.broker.grant_first({0});
  h.settle();
  CHECK(h.executor.launched.at(0).timeout_seconds == Approx(120));  // 2 min of run; 9 min were left
  h.executor.finish(1, 0);
  h.settle();
  h.advance(90);
  h.broker.grant_first({0});
  h.settle();
  CHECK(h.executor.launched.at(1).timeout_seconds == Approx(90));  // 3 min - 1.5 min of waiting < 2 min
}

TEST_CASE("engine (fake clock): a job's timeout-minutes cancels its running step and fails the job", "[engine]") {
  Harness h("name: j\ntimeout-minutes: 1\nsteps:\n  - {name: s, run: 'sleep 600'}\n  - {name: after, run: 'true'}\n");
  REQUIRE(h.executor.launched.size() == 1);
  h.advance(61);
  CHECK(h.executor.cancelled == std::vector<std::uint64_t>{1});
  CHECK(h.engine->record().jobs[0].timed_out);
  CHECK(h.engine->record().jobs[0].state == JobState::Failed);
  CHECK(h.journaled(0) == Events{"0 waiting", "0 running", "0 cancelled", "1 cancelled", "job failed"});
  CHECK(h.executor.launched.size() == 1);  // the next step never started
}

TEST_CASE("engine (fake clock): fail-fast cancels the other legs of a matrix job, without it they go on", "[engine]") {
  const std::string job = "name: m\nstrategy: {matrix: {n: [1, 2, 3]}, max-parallel: 2FF}\nsteps:\n  - {name: s, run: 'leg ${{ matrix.n }}'}\n";
  SECTION("fail-fast (the default)") {
    Harness h(std::regex_replace(job, std::regex("FF"), ""));
    REQUIRE(h.executor.launched.size() == 2);  // max-parallel: the third leg waits
    h.executor.finish(1, 1);
    h.settle();
    CHECK(h.executor.cancelled == std::vector<std::uint64_t>{2});
    CHECK(h.journaled(0) == Events{"0 waiting", "0 running", "0 failed", "job failed"});
    CHECK(h.journaled(1) == Events{"0 waiting", "0 running", "0 cancelled", "job cancelled"});
    CHECK(h.journaled(2) == Events{"0 cancelled", "job cancelled"});
    CHECK(h.engine->record().jobs[2].reason.find("fail-fast") == 0);
    CHECK(h.executor.launched.size() == 2);
  }
  SECTION("fail-fast: false") {
    Harness h(std::regex_replace(job, std::regex("FF"), ", fail-fast: false"));
    h.executor.finish(1, 1);
    h.settle();
    CHECK(h.executor.cancelled.empty());
    REQUIRE(h.executor.launched.size() == 3);  // the third leg took the freed place
    CHECK(h.executor.launched[2].command == "leg 3");
    h.executor.finish(2, 0);
    h.executor.finish(3, 0);
    h.settle();
    CHECK(h.journaled(2) == Events{"0 waiting", "0 running", "0 succeeded", "job succeeded"});
  }
}

TEST_CASE("engine (fake clock): needs and if: a failed need skips its plain dependants, runs failure() and always() "
          "ones, and after a failed step only status-function steps run", "[engine]") {
  Harness h(Jobs{{"a.yml", "name: a\nsteps:\n  - {name: s, run: 'false'}\n  - {name: plain, run: 'true'}\n"
                       "  - {name: on-failure, if: failure(), run: 'report'}\n  - {name: always, if: always(), run: 'cleanup'}\n"},
             {"b.yml", "name: b\nneeds: [a]\nsteps:\n  - {name: s, run: 'b'}\n"},
             {"c.yml", "name: c\nneeds: [a]\nif: failure()\nsteps:\n  - {name: s, run: 'c'}\n"},
             {"d.yml", "name: d\nneeds: [a]\nif: always()\nsteps:\n  - {name: s, run: 'd'}\n"}});
  const int a = h.job("a"), b = h.job("b"), c = h.job("c"), d = h.job("d");
  h.executor.finish(1, 1);
  h.settle();
  REQUIRE(h.executor.launched.size() == 2);
  CHECK(h.executor.launched[1].command == "report");
  h.executor.finish(2, 0);
  h.settle();
  CHECK(h.executor.launched.at(2).command == "cleanup");
  h.executor.finish(3, 0);
  h.settle();
  CHECK(h.journaled(a) == Events{"0 waiting", "0 running", "0 failed", "1 skipped", "2 waiting", "2 running", "2 succeeded",
                                 "3 waiting", "3 running", "3 succeeded", "job failed"});
  CHECK(h.journaled(b) == Events{"0 skipped", "job skipped"});
  CHECK(h.engine->record().jobs[b].reason == "a job it needs did not succeed");
  std::vector<std::string> commands;
  for (const auto& l : h.executor.launched) commands.push_back(l.command);
  CHECK(std::count(commands.begin(), commands.end(), "c") == 1);
  CHECK(std::count(commands.begin(), commands.end(), "d") == 1);
  CHECK(std::count(commands.begin(), commands.end(), "b") == 0);
  (void)c;
  (void)d;
}

TEST_CASE("engine (fake clock): data flow: a step's $GITHUB_OUTPUT, $GITHUB_ENV and $GITHUB_PATH reach later steps, "
          "its job's outputs reach dependants' env and run", "[engine]") {
  Harness h(Jobs{{"j.yml", "name: j\noutputs: {v: '${{ steps.one.outputs.v }}'}\nsteps:\n  - {id: one, name: one, run: 'make'}\n"
                       "  - {name: two, run: 'use ${{ steps.one.outputs.v }}'}\n"},
             {"k.yml", "name: k\nneeds: [j]\nenv: {FROM_J: '${{ needs.j.outputs.v }}'}\nsteps:\n  - {name: three, run: 'got ${{ needs.j.outputs.v }}'}\n"}});
  h.step_writes(0, "GITHUB_OUTPUT", "v=42\n");
  h.step_writes(0, "GITHUB_ENV", "X=from-env\n");
  h.step_writes(0, "GITHUB_PATH", "/opt/tool/bin\n");
  h.executor.finish(1, 0);
  h.settle();
  REQUIRE(h.executor.launched.size() == 2);
  CHECK(h.executor.launched[1].command == "use 42");
  CHECK(h.executor.env(1, "X") == "from-env");
  // $GITHUB_PATH first, after only pto-runner's own task-submit (which comes first on every step's PATH).
  const std::string path = h.executor.env(1, "PATH");
  const std::string tools = path.substr(0, path.find(':'));
  CHECK(fs::exists(fs::path(tools) / "task-submit"));
  CHECK(path.substr(tools.size() + 1).rfind("/opt/tool/bin:", 0) == 0);
  CHECK(h.engine->record().jobs[0].steps[0].outputs.at("v") == "42");
  h.executor.finish(2, 0);
  h.settle();
  REQUIRE(h.executor.launched.size() == 3);
  CHECK(h.executor.launched[2].command == "got 42");
  CHECK(h.executor.env(2, "FROM_J") == "42");
  CHECK(h.executor.env(2, "X").empty());  // $GITHUB_ENV is the job's, not the run's
  h.executor.finish(3, 0);
  h.settle();
  CHECK(h.engine->record().jobs[h.job("j")].outputs.at("v") == "42");
  CHECK(h.engine->result() == ExitCode::Success);
}

TEST_CASE("engine (fake clock): a malformed $GITHUB_OUTPUT fails the step, journaled as failed", "[engine]") {
  Harness h("name: j\nsteps:\n  - {name: s, run: 'x'}\n");
  h.step_writes(0, "GITHUB_OUTPUT", "v<<EOF\nno end marker\n");
  h.executor.finish(1, 0);
  h.settle();
  CHECK(h.state(0, 0) == StepState::Failed);
  CHECK(h.engine->record().jobs[0].steps[0].error.find("$GITHUB_OUTPUT") == 0);
  CHECK(h.journaled(0) == Events{"0 waiting", "0 running", "0 failed", "job failed"});
}

TEST_CASE("engine (fake clock): a step's reports are read through the offload, off the engine's thread: meanwhile the step "
          "runs on with its end kept for a take-over, then it is judged by them", "[engine][tests]") {
  Offloads offloaded;
  Harness h(Jobs{{"j.yml", "name: j\nsteps:\n  - {name: s, tests: {junit: 'r.xml'}, retry: {max: 0}, run: 'x'}\n"}}, "", false, offloaded.tune());
  h.dir.write("r.xml", "<testsuite><testcase classname='c' name='passes'/><testcase classname='c' name='fails'>"
                       "<failure message='boom'/></testcase></testsuite>");
  h.executor.finish(1, 1);
  h.settle();
  REQUIRE(offloaded.queued.size() == 1);
  // Not judged yet: running, its end kept (journaled with the step, so a next daemon reads the reports again).
  const StepRecord& sr = h.engine->record().jobs[0].steps[0];
  CHECK(h.state(0, 0) == StepState::Running);
  REQUIRE(sr.ended.has_value());
  CHECK(sr.ended->exit_code == 1);
  CHECK(sr.tests.empty());
  CHECK_FALSE(h.engine->finished());
  offloaded.run(0);  // the read, wherever the host runs it, and its answer on the engine's thread
  h.settle();
  CHECK(h.state(0, 0) == StepState::Failed);
  CHECK_FALSE(sr.ended.has_value());
  REQUIRE(sr.tests.size() == 2);
  CHECK(sr.tests_summary.failed == 1);
  CHECK(h.journaled(0) == Events{"0 waiting", "0 running", "0 failed", "job failed"});
}

TEST_CASE("engine (fake clock): a cancel that comes while an ended step's reports are read does not undo its end: it is judged "
          "by its reports as it ended", "[engine][tests]") {
  Offloads offloaded;
  Harness h(Jobs{{"j.yml", "name: j\nsteps:\n  - {name: s, tests: {junit: 'r.xml'}, retry: {max: 0}, run: 'x'}\n"}}, "", false, offloaded.tune());
  h.dir.write("r.xml", "<testsuite><testcase classname='c' name='fails'><failure message='boom'/></testcase></testsuite>");
  h.executor.finish(1, 0);  // it exits 0 with a failed test in its report
  h.settle();
  REQUIRE(offloaded.queued.size() == 1);
  h.engine->cancel(0, "superseded");
  h.settle();
  CHECK(h.state(0, 0) == StepState::Running);  // still its reports' to decide
  offloaded.run(0);
  h.settle();
  const StepRecord& sr = h.engine->record().jobs[0].steps[0];
  // Not cancelled, and judged: green as its command said (it exited 0), with its failed test kept and shown.
  CHECK(h.state(0, 0) == StepState::Succeeded);
  CHECK(sr.tests_summary.failed == 1);
  CHECK(sr.verdict.rfind("passed (its command exited 0): 1 failed", 0) == 0);
}

TEST_CASE("engine (fake clock): a run taken over while an ended step's reports were read holds that step's cards again, reads "
          "the reports again and gives the cards back once judged", "[engine][tests]") {
  Offloads offloaded;
  Harness h(Jobs{{"j.yml", "name: j\nsteps:\n  - {name: s, devices: 1, tests: {junit: 'r.xml'}, retry: {max: 0}, run: 'x'}\n"}}, "", false,
            offloaded.tune());
  h.dir.write("r.xml", "<testsuite><testcase classname='c' name='passes'/></testsuite>");
  h.broker.grant_first({3});
  h.settle();
  h.executor.finish(1, 0);
  h.settle();
  REQUIRE(offloaded.queued.size() == 1);
  REQUIRE(h.engine->record().jobs[0].steps[0].ended.has_value());
  // The daemon goes away here: a new engine goes on from the journaled state (as hosting/run_host_adopt.cpp does).
  FakeBroker broker;
  FakeExecutor executor;
  EngineOptions eo = h.options;
  RunEngine next(EngineSeams{h.io, h.clock, broker, executor, nullptr, nullptr}, h.engine->plan(), eo);
  std::vector<std::vector<int>> held_again;
  int reattached_running = 0;
  REQUIRE(next.adopt(h.engine->record(), [&](std::size_t, std::size_t, const std::string&, const std::vector<int>& cards,
                                              std::function<void(const StepOutcome&)> done) -> std::uint64_t {
            if (done) ++reattached_running;
            else held_again.push_back(cards);
            return 0;
          }) == "");
  h.settle();
  CHECK(reattached_running == 0);  // nothing runs any more...
  CHECK(held_again == std::vector<std::vector<int>>{{3}});  // ...but its card is held again until it is judged
  REQUIRE(offloaded.queued.size() == 2);  // its reports are read again
  offloaded.run(1);
  h.settle();
  CHECK(next.record().jobs[0].steps[0].state == StepState::Succeeded);
  CHECK(broker.released == std::vector<std::vector<int>>{{3}});
}

TEST_CASE("engine (fake clock): a parallel job's max-parallel bounds how many of its steps are active at once",
          "[engine]") {
  Harness h("name: j\nparallel: true\nstrategy: {max-parallel: 2}\nsteps:\n  - {name: a, run: 'a'}\n  - {name: b, run: 'b'}\n"
            "  - {name: c, run: 'c'}\n  - {name: d, run: 'd'}\n");
  std::size_t most = 0;
  for (std::uint64_t handle = 1; handle <= 4; ++handle) {
    most = std::max(most, h.executor.running.size());
    REQUIRE(h.executor.running.count(handle));
    h.executor.finish(handle, 0);
    h.settle();
  }
  CHECK(most == 2);
  CHECK(h.executor.launched.size() == 4);
  CHECK(h.engine->result() == ExitCode::Success);
}

TEST_CASE("engine (fake broker): a step with no estimate asks with none, but simulated it asks with its scaled sleep, so expected starts read in the run's time scale", "[engine]") {
  const Jobs jobs{{"a.yml", "name: a\nsteps:\n  - {name: unknown, devices: 1, run: 'true'}\n"},
                  {"b.yml", "name: b\nsteps:\n  - {name: known, devices: 1, expected-minutes: 2, run: 'true'}\n"}};
  auto asked = [](const Harness& h, const std::string& label) {
    for (const auto& [ticket, w] : h.broker.waiting)
      if (w.req.label == label) return w.req.expected_seconds;
    FAIL("no request of " << label);
    return -1.0;
  };
  Harness real(jobs);
  REQUIRE(real.broker.waiting.size() == 2);
  CHECK(asked(real, "a / unknown") == 0);  // unknown: never backfills ahead of a reservation
  CHECK(asked(real, "b / known") == 120);
  Harness simulated(jobs, "", false, [](EngineOptions& eo) {
    eo.simulate = true;
    eo.time_scale = 0.01;
  });
  REQUIRE(simulated.broker.waiting.size() == 2);
  CHECK(asked(simulated, "a / unknown") == Approx(0.6));  // the default minute, scaled
  CHECK(asked(simulated, "b / known") == Approx(1.2));
}

TEST_CASE("engine (fake broker): a simulated run says so, and its steps with tests: say nothing of tests (none ran)", "[engine]") {
  const Jobs jobs{{"a.yml", "name: a\nsteps:\n  - {name: suite, devices: 1, tests: pytest, run: 'pytest'}\n"}};
  Harness real(jobs);
  const json shown = run_to_json(real.engine->record(), real.engine->plan(), "running", -1, 0);
  CHECK_FALSE(shown.contains("simulated"));
  CHECK(shown["jobs"][0]["steps"][0].contains("tests"));
  Harness simulated(jobs, "", false, [](EngineOptions& eo) { eo.simulate = true; });
  const json sim = run_to_json(simulated.engine->record(), simulated.engine->plan(), "running", -1, 0);
  CHECK(sim["simulated"] == true);
  CHECK_FALSE(sim["jobs"][0]["steps"][0].contains("tests"));
  CHECK(run_state_from_json(run_state_json(simulated.engine->record())).simulated);  // kept across a restart
}

TEST_CASE("engine (reuse): a job whose steps all have green results starts at once, reused, and the lead job and the build only "
          "it needs are skipped, and run for a job that runs", "[engine][reuse]") {
  auto green = [](EngineOptions& eo) {
    eo.reuse = EngineOptions::Reuse{[](const std::string& key) {
                                      ReusableResult r;
                                      r.key = key, r.run = "earlier", r.step = "1-0", r.label = "t / a";
                                      return std::optional<ReusableResult>(r);
                                    },
                                    [](const ReusableResult&) {}};
  };
  auto trees = [](RunEngine& e) { e.set_input_trees({{globs_text({}), "tree1"}}); };
  const Jobs only_reused = {{"build.yml", "name: build\nreuse: false\nsteps:\n  - run: make\n"},
                            {"t.yml", "name: t\ntoolchain: ptoas\nneeds: [build]\nsteps:\n  - name: a\n    devices: 1\n    run: test-a\n"
                                     "  - name: a again\n    devices: 1\n    run: test-a\n"}};  // deduplicated: it is what `a` is
  {
    Harness h(only_reused, "", false, green, trees);
    CHECK(h.executor.launched.empty());  // neither the lead, nor the build, nor the step
    CHECK(h.state(h.job("t"), 0) == StepState::Reused);
    CHECK(h.state(h.job("t"), 1) == StepState::Deduplicated);
    CHECK(h.engine->record().jobs[h.job("build")].state == JobState::Skipped);
    CHECK(h.engine->record().jobs[h.job("build")].reason.find("not needed") == 0);
    CHECK(h.engine->record().jobs[h.job("toolchain")].state == JobState::Skipped);
    CHECK(h.engine->finished());
    CHECK(h.engine->result() == ExitCode::Success);
  }
  {
    // Another toolchain job that cannot be reused: the lead runs for it, the build still only for `t`.
    Jobs jobs = only_reused;
    jobs["u.yml"] = "name: u\ntoolchain: ptoas\nreuse: false\nsteps:\n  - run: test-u\n";
    Harness h(jobs, "", false, green, trees);
    REQUIRE(h.executor.launched.size() == 1);
    CHECK(h.executor.launched[0].label == h.engine->plan().jobs[h.job("toolchain")].id + " / " + h.engine->plan().jobs[h.job("toolchain")].steps[0].name);
    CHECK(h.state(h.job("t"), 0) == StepState::Reused);
    CHECK(h.engine->record().jobs[h.job("build")].state == JobState::Skipped);
    h.executor.finish(1, 0);
    h.settle();
    REQUIRE(h.executor.launched.size() == 2);
    CHECK(h.executor.launched[1].command.find("test-u") != std::string::npos);
  }
  {
    // Without results (a fresh tree), everything runs in its order: the lead and the build first.
    Harness h(only_reused, "", false, nullptr, trees);
    CHECK(h.executor.launched.size() == 2);
    CHECK(h.state(h.job("t"), 0) == StepState::Pending);
  }
}
