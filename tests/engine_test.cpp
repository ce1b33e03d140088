// RunEngine driven through its two seams with fakes, as ninja's build_test drives its Builder with a fake
// command runner: a CardBroker whose grants the test hands out, and an Executor whose steps end when the test
// says. No process, no flock, no clock: each test states an order of events and what the engine does.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <map>

#include "config/project.h"
#include "engine/card_broker.h"
#include "engine/engine.h"
#include "exec/executor.h"
#include "plan/plan.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {

struct FakeBroker : CardBroker {
  struct Waiting {
    CardRequest req;
    Grant grant;
    Impossible impossible;
  };
  std::map<std::uint64_t, Waiting> waiting;
  std::uint64_t next = 0;
  std::vector<std::vector<int>> released;
  std::vector<std::pair<std::vector<int>, bool>> outcomes;  // cards, infrastructure failure
  std::vector<std::uint64_t> withdrawn;

  std::uint64_t request(CardRequest req, Grant g, Impossible i) override {
    waiting[++next] = {std::move(req), std::move(g), std::move(i)};
    return next;
  }
  void withdraw(std::uint64_t t) override {
    waiting.erase(t);
    withdrawn.push_back(t);
  }
  void release(const std::vector<int>& cards) override { released.push_back(cards); }
  std::vector<int> report_outcome(const std::vector<int>& cards, bool infra, const std::string&) override {
    outcomes.emplace_back(cards, infra);
    return {};
  }
  bool is_drained(int) const override { return false; }
  void relabel(int, const std::string&) override {}
  std::vector<QueueEntry> queue() override { return {}; }

  /// Grants the oldest waiting request these cards.
  void grant_first(std::vector<int> cards) {
    REQUIRE_FALSE(waiting.empty());
    auto w = std::move(waiting.begin()->second);
    waiting.erase(waiting.begin());
    w.grant(cards);
  }
  void refuse_first(const std::string& why) {
    REQUIRE_FALSE(waiting.empty());
    auto w = std::move(waiting.begin()->second);
    waiting.erase(waiting.begin());
    w.impossible(why);
  }
};

struct FakeExecutor : Executor {
  struct Running {
    StepLaunch launch;
    std::function<void(const StepOutcome&)> done;
  };
  std::map<std::uint64_t, Running> running;
  std::vector<StepLaunch> launched;
  std::vector<std::uint64_t> cancelled;
  std::uint64_t next = 0;

  std::uint64_t start(StepLaunch l, std::function<void(const StepOutcome&)> done) override {
    launched.push_back(l);
    running[++next] = {std::move(l), std::move(done)};
    return next;
  }
  void cancel(std::uint64_t h) override {
    cancelled.push_back(h);
    finish(h, -1, SIGTERM, true);
  }
  std::size_t active() const override { return running.size(); }
  bool places_steps = false;  // like the Slurm executor: it picks the cards itself
  bool places(const StepLaunch& l) const override { return places_steps && l.devices > 0; }

  void finish(std::uint64_t h, int exit_code, int signal = 0, bool was_cancelled = false) {
    auto it = running.find(h);
    REQUIRE(it != running.end());
    auto done = std::move(it->second.done);
    running.erase(it);
    StepOutcome o;
    o.exit_code = exit_code;
    o.signal = signal;
    o.cancelled = was_cancelled;
    done(o);
  }
  std::string env(std::size_t i, const std::string& key) const {
    for (const auto& kv : launched.at(i).env)
      if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    return "";
  }
};

struct Harness {
  TempDir dir;
  boost::asio::io_context io;
  FakeBroker broker;
  FakeExecutor executor;
  std::unique_ptr<RunEngine> engine;

  explicit Harness(const std::string& job, const std::string& runner_yml = "", bool executor_places = false) {
    executor.places_steps = executor_places;
    write_project(dir, {{"j.yml", job}});
    if (!runner_yml.empty()) dir.write("runner.yml", runner_yml);
    LoadOptions lo;
    lo.root = dir.str();
    Diagnostics d;
    Project project = load_project(lo, d);
    Plan plan = build_plan(project, PlanOptions{}, d);
    std::string first = d.items().empty() ? std::string() : format_diagnostic(d.items()[0]);
    INFO(first);
    REQUIRE_FALSE(d.has_input_errors());
    EngineOptions eo = make_engine_options(project.root, (dir.path() / "state").string(), project.runner, false, 1, "PTO_RUNNER_");
    engine = std::make_unique<RunEngine>(io, std::move(plan), broker, executor, std::move(eo), nullptr);
    engine->start();
    settle();
  }
  void settle() {
    io.restart();
    io.poll();
  }
  StepState state(int job, int step) const { return engine->record().jobs[job].steps[step].state; }
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
  Harness h("name: j\nsteps:\n  - {name: s, devices: 1, run: 'true'}\n", "health:\n  infra-exit-codes: [77]\n");
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
