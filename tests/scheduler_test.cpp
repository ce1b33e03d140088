// The scheduler's policy, with fake cards and a fake queue: no clock, no processes.
#include <catch2/catch.hpp>

#include <deque>
#include <limits>

#include "baseline_policies.h"
#include "sched/scheduler.h"

using namespace pto;

namespace {

std::vector<SchedCard> cards(int n) {
  std::vector<SchedCard> out;
  for (int i = 0; i < n; ++i) out.push_back({i, true, true, "", 0, ""});
  return out;
}

void hold(std::vector<SchedCard>& cs, int id, const std::string& holder, double until = 1e9) {
  cs[id].free = false;
  cs[id].holder = holder;
  cs[id].busy_until = until;
}

}  // namespace

TEST_CASE("scheduler: gang allocation is all or nothing", "[sched]") {
  auto cs = cards(2);
  hold(cs, 0, "job / a");
  auto r = schedule(cs, {}, {{1, 2, "moe"}});
  CHECK(r.start.empty());
  CHECK(r.waiting_reason[1] == "waiting for 2 cards; 1 reserved; 0 held by job / a");
}

TEST_CASE("scheduler: a multi-card step stays inside one group", "[sched]") {
  auto cs = cards(4);
  hold(cs, 0, "x");
  hold(cs, 3, "y");
  // 1 and 2 are free but in different groups.
  auto r = schedule(cs, {{0, 1}, {2, 3}}, {{1, 2, "moe"}});
  CHECK(r.start.empty());
  CHECK(r.waiting_reason[1].find("waiting for 2 cards in one group") == 0);
  cs[3].free = true;
  r = schedule(cs, {{0, 1}, {2, 3}}, {{1, 2, "moe"}});
  REQUIRE(r.start.size() == 1);
  CHECK(r.start[0].cards == std::vector<int>{2, 3});
}

TEST_CASE("scheduler: tightest fit keeps whole groups free", "[sched]") {
  auto cs = cards(4);
  hold(cs, 0, "x");
  // A 1-card step goes to card 1 (group {0,1} has one free) rather than breaking group {2,3}.
  auto r = schedule(cs, {{0, 1}, {2, 3}}, {{1, 1, "a"}, {2, 2, "b"}});
  REQUIRE(r.start.size() == 2);
  CHECK(r.start[0].cards == std::vector<int>{1});
  CHECK(r.start[1].cards == std::vector<int>{2, 3});
}

TEST_CASE("scheduler: later requests may not take cards reserved for an earlier one", "[sched]") {
  auto cs = cards(2);
  hold(cs, 0, "job / long");
  // Card 1 is free, but the 2-card step ahead reserved it.
  auto r = schedule(cs, {}, {{1, 2, "moe"}, {2, 1, "small"}});
  CHECK(r.start.empty());
  CHECK(r.reserved.at(1) == 1);
  CHECK(r.waiting_reason[2].find("reserved for steps ahead of it in the queue") != std::string::npos);
}

TEST_CASE("scheduler: backfill uses cards nobody reserved", "[sched]") {
  auto cs = cards(4);
  hold(cs, 0, "a");
  hold(cs, 1, "b");
  hold(cs, 2, "c");
  // 4-card request reserves everything; nothing passes it.
  auto r = schedule(cs, {}, {{1, 4, "big"}, {2, 1, "small"}});
  CHECK(r.start.empty());
  // With groups, a 2-card request reserves only its group; a 1-card request backfills the other group.
  cs = cards(4);
  hold(cs, 0, "a");
  hold(cs, 2, "c");
  r = schedule(cs, {{0, 1}, {2, 3}}, {{1, 2, "moe"}, {2, 1, "small"}});
  REQUIRE(r.start.size() == 1);
  CHECK(r.start[0].request == 2);
  CHECK(r.start[0].cards == std::vector<int>{3});
  CHECK(r.reserved.at(1) == 1);
}

TEST_CASE("scheduler: reservation prefers the busy cards expected to free first", "[sched]") {
  auto cs = cards(3);
  hold(cs, 0, "slow", 100);
  hold(cs, 1, "fast", 5);
  hold(cs, 2, "mid", 50);
  auto r = schedule(cs, {}, {{1, 2, "moe"}});
  CHECK(r.reserved.count(1));
  CHECK(r.reserved.count(2));
  CHECK_FALSE(r.reserved.count(0));
}

TEST_CASE("scheduler: drained cards are never handed out, impossible requests are flagged", "[sched]") {
  auto cs = cards(2);
  cs[1].usable = false;
  cs[1].free = false;
  auto r = schedule(cs, {}, {{1, 1, "a"}, {2, 2, "b"}});
  REQUIRE(r.start.size() == 1);
  CHECK(r.start[0].cards == std::vector<int>{0});
  CHECK(r.impossible == std::vector<std::uint64_t>{2});
  CHECK(r.waiting_reason[2] == "needs 2 cards but only 1 usable (1 drained)");
}

TEST_CASE("scheduler: a 2-card step behind a continuous stream of 1-card steps starts within bounded completions",
          "[sched]") {
  // Simulate: 2 cards, a 2-card request submitted while 1-card steps keep arriving. Each round one running
  // step completes and two new 1-card steps are submitted.
  struct Running {
    std::uint64_t id;
    int card;
  };
  std::deque<SchedRequest> queue;
  std::vector<Running> running;
  std::uint64_t next = 1;
  auto cs = cards(2);
  // Fill both cards.
  for (int c = 0; c < 2; ++c) {
    hold(cs, c, "s" + std::to_string(next));
    running.push_back({next++, c});
  }
  const std::uint64_t big = next++;
  queue.push_back({big, 2, "moe"});
  int completions = 0;
  bool started = false;
  for (int round = 0; round < 50 && !started; ++round) {
    queue.push_back({next++, 1, "small"});
    queue.push_back({next++, 1, "small"});
    // Complete the oldest running step.
    Running done = running.front();
    running.erase(running.begin());
    cs[done.card].free = true;
    cs[done.card].holder.clear();
    ++completions;
    std::vector<SchedRequest> q(queue.begin(), queue.end());
    auto r = schedule(cs, {}, q);
    for (const auto& a : r.start) {
      if (a.request == big) started = true;
      for (int c : a.cards) {
        hold(cs, c, "x");
        if (a.request != big) running.push_back({a.request, c});
      }
      queue.erase(std::remove_if(queue.begin(), queue.end(), [&](const SchedRequest& s) { return s.id == a.request; }),
                  queue.end());
    }
  }
  CHECK(started);
  CHECK(completions <= 2);  // it needs both cards to free once; nothing else may start meanwhile

  // The same stream under greedy backfill starves it.
  auto gcs = cards(2);
  hold(gcs, 0, "a");
  std::vector<SchedRequest> q = {{1, 2, "moe"}, {2, 1, "small"}};
  auto g = pto::bench::schedule_with_policy(pto::bench::SchedPolicy::GreedyBackfill, gcs, {}, q);
  REQUIRE(g.start.size() == 1);
  CHECK(g.start[0].request == 2);
}

TEST_CASE("scheduler: a short step may backfill a reserved card only if it ends before the reservation", "[sched]") {
  auto cs = cards(2);
  hold(cs, 0, "long", 100);  // card 0 frees at t=100; the 2-card step reserves cards 0 and 1
  // now = 10: a 50 s step ends at 60 <= 100, it may use card 1; a 200 s step may not; an unknown one may not.
  auto r = schedule(cs, {}, {{1, 2, "moe", 600}, {2, 1, "short", 50}}, 10);
  REQUIRE(r.start.size() == 1);
  CHECK(r.start[0].request == 2);
  CHECK(r.start[0].cards == std::vector<int>{1});
  CHECK(schedule(cs, {}, {{1, 2, "moe", 600}, {2, 1, "long", 200}}, 10).start.empty());
  CHECK(schedule(cs, {}, {{1, 2, "moe", 600}, {2, 1, "unknown", 0}}, 10).start.empty());
  // Card 0's holder overran its estimate (now 150 > 100): the reservation's end is unknown, no backfill.
  CHECK(schedule(cs, {}, {{1, 2, "moe", 600}, {2, 1, "short", 5}}, 150).start.empty());
  // A holder with no estimate at all also blocks backfill.
  auto unknown = cards(2);
  hold(unknown, 0, "no estimate");
  unknown[0].busy_until = std::numeric_limits<double>::infinity();
  CHECK(schedule(unknown, {}, {{1, 2, "moe", 600}, {2, 1, "short", 5}}, 10).start.empty());
}
