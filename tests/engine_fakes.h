#pragma once
// Fakes of the engine's seams, for the tests that drive a run without a process, a flock or real time
// (engine_test, hosted_run_test): a CardBroker whose grants the test hands out and an Executor whose steps end
// when the test says.
#include <signal.h>

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/card_broker.h"
#include "exec/executor.h"

namespace pto::test {

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

  std::function<void()> before_effect;  // told before each start and signal (the engine test's durability check)

  std::uint64_t start(StepLaunch l, std::function<void(const StepOutcome&)> done) override {
    if (before_effect) before_effect();
    launched.push_back(l);
    running[++next] = {std::move(l), std::move(done)};
    return next;
  }
  void cancel(std::uint64_t h) override {
    if (before_effect) before_effect();
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
    if (before_effect) before_effect();  // like a supervisor told the end was read: it forgets it now
  }
  std::string env(std::size_t i, const std::string& key) const {
    for (const auto& kv : launched.at(i).env)
      if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    return "";
  }
};

}  // namespace pto::test
