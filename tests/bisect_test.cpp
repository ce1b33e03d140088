// Find the commit (issue 34): bisection's policy on simulated steps (bisect/bisection), and on a daemon with a
// generated repository of 40 commits (real git, real runs).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "bisect/bisection.h"

using pto::Bisection;
using pto::BisectSpec;
using pto::ProbeOutcome;

namespace {

std::vector<std::string> commits(int n) {
  std::vector<std::string> out;
  for (int i = 1; i <= n; ++i) out.push_back(std::string(40 - std::to_string(i).size(), 'c') + std::to_string(i));
  return out;
}

/// Runs `b` to its end against a step that fails from commit `culprit` (1-based) on with rate `p` (rng), and
/// whose probes on a card fault (`card_fault`: every first attempt of a commit) say nothing. Probes run in
/// waves, as a daemon starts every wanted probe at once. Returns the number of probe runs.
int drive(Bisection& b, const std::vector<std::string>& path, int culprit, double p, std::mt19937& rng, bool card_fault = false) {
  std::bernoulli_distribution fails(p);
  int runs = 0, next_run = 0;
  std::map<std::string, int> faulted;
  while (!b.done()) {
    std::vector<std::pair<std::string, std::string>> wave;  // run, sha
    for (int probe : b.wanted()) {
      const std::string run = "r" + std::to_string(++next_run);
      b.started(probe, run);
      wave.push_back({run, b.sha_of(probe)});
    }
    REQUIRE_FALSE(wave.empty());
    for (const auto& [run, sha] : wave) {
      if (!b.has_run(run)) continue;  // cancelled: its verdict was in
      ++runs;
      const int index = static_cast<int>(std::find(path.begin(), path.end(), sha) - path.begin()) + 1;  // good: 0 (not in path)
      if (card_fault && faulted[sha]++ == 0) {
        b.finished(run, ProbeOutcome::Inconclusive, "card: 507018 on card 0");
        continue;
      }
      const bool broken = index >= culprit && index <= static_cast<int>(path.size());
      b.finished(run, broken && fails(rng) ? ProbeOutcome::Fail : ProbeOutcome::Pass, "");
    }
  }
  return runs;
}

}  // namespace

TEST_CASE("bisection: a step broken at commit 23 of 40 is found with at most ceil(log2 40) + 2 probe runs", "[bisect]") {
  const auto path = commits(40);
  for (int culprit : {1, 2, 23, 39, 40}) {
    Bisection b("b", BisectSpec{"g000", path.back(), "j", "s", "", 1}, path);
    std::mt19937 rng(1);
    const int runs = drive(b, path, culprit, 1.0, rng);
    INFO("culprit " << culprit << ": " << b.json().dump());
    REQUIRE(b.state() == pto::BisectState::Found);
    CHECK(*b.culprit() == path[static_cast<std::size_t>(culprit - 1)]);
    CHECK(runs <= static_cast<int>(std::ceil(std::log2(40))) + 2);
  }
  // Its record survives a round trip (the journal's).
  Bisection b("b", BisectSpec{"g000", path.back(), "j", "s", "", 1}, path);
  std::mt19937 rng(1);
  drive(b, path, 23, 1.0, rng);
  const Bisection back = Bisection::from_json(b.json());
  CHECK(back.json() == b.json());
}

TEST_CASE("bisection: a step failing half the time from commit 23 on is found with --repeat auto for every seed, never before "
          "commit 23, and a card's fault on a probe is probed again, not counted as bad",
          "[bisect]") {
  const auto path = commits(40);
  int found_23 = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    Bisection b("b", BisectSpec{"g000", path.back(), "j", "s", "", 0}, path);
    std::mt19937 rng(seed);
    drive(b, path, 23, 0.5, rng, seed % 4 == 0);
    INFO("seed " << seed << ": " << b.json().dump().substr(0, 2000));
    if (b.state() == pto::BisectState::Failed) {
      // Bad passed 30 probes in a row (chance 1e-9 at 0.5): said, never guessed.
      CHECK(b.error().find("not red") != std::string::npos);  // bad passed every probe measuring it
      continue;
    }
    REQUIRE(b.state() == pto::BisectState::Found);
    const auto at = std::find(path.begin(), path.end(), *b.culprit()) - path.begin() + 1;
    CHECK(at >= 23);  // a commit before it never fails: never named
    found_23 += at == 23;
    CHECK(b.json()["repeats"].get<int>() >= 1);
  }
  CHECK(found_23 >= 34);  // each verdict is wrong with chance under 5%
}

TEST_CASE("bisection: a bad commit that passes, a good one that fails, a step missing at a commit and a card that never "
          "recovers end it with what happened said", "[bisect]") {
  const auto path = commits(8);
  {
    Bisection b("b", BisectSpec{"g000", path.back(), "j", "s", "", 2}, path);
    for (int p : b.wanted()) b.started(p, "r" + std::to_string(p));
    for (int p = 0; p < 4; ++p) b.finished("r" + std::to_string(p), ProbeOutcome::Pass, "");
    CHECK(b.state() == pto::BisectState::Failed);
    CHECK(b.error().find("passed 2 probe(s): it is not red") != std::string::npos);
  }
  {
    Bisection b("b", BisectSpec{"g000", path.back(), "j", "s", "", 1}, path);
    for (int p : b.wanted()) b.started(p, "r" + std::to_string(p));
    b.finished("r0", ProbeOutcome::Fail, "");
    b.finished("r1", ProbeOutcome::Fail, "");
    CHECK(b.error().find("g000 fails too: it is not green") != std::string::npos);
  }
  {
    Bisection b("b", BisectSpec{"g000", path.back(), "j", "check", "", 1}, path);
    for (int p : b.wanted()) b.started(p, "r" + std::to_string(p));
    b.finished("r0", ProbeOutcome::Fail, "");
    b.finished("r1", ProbeOutcome::Missing, "no step 'check' in job 'j'");
    CHECK(b.error().find("the step 'check' of job 'j' does not exist at g000") != std::string::npos);
    CHECK(b.error().find("not guessed") != std::string::npos);
  }
  {
    Bisection b("b", BisectSpec{"g000", path.back(), "j", "s", "", 1}, path);
    int n = 0;
    while (!b.done()) {
      for (int p : b.wanted()) b.started(p, "r" + std::to_string(++n)), b.finished("r" + std::to_string(n), ProbeOutcome::Inconclusive, "card 3");
    }
    CHECK(b.error().find("could not be judged: 3 probes failed by a card or the host") != std::string::npos);
  }
  // A restart loses the probes that were running: they are run again.
  Bisection b("b", BisectSpec{"g000", path.back(), "j", "s", "", 1}, path);
  for (int p : b.wanted()) b.started(p, "r" + std::to_string(p));
  Bisection again = Bisection::from_json(b.json());
  again.restarted();
  CHECK(again.wanted().size() == 2);
  CHECK_FALSE(again.has_run("r0"));
}
