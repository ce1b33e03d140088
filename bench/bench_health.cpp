// Every red is true (issue 22): a simulated CI day with faults injected, in bench_schedule's discrete-event
// style, under today's behaviour (every failure red, nothing charged, nothing retried) and under pto-runner's
// (engine/failure_evidence's causes, sched/device_pool's card health with its real charges on a virtual
// clock, config/job_file's RetryPolicy: card failures once more elsewhere, a flaky-marked step once more).
//
// The day: 8 cards, a run every ~6 min for 12 h, each of 6 one-card steps (lognormal, median 2 min). Faults:
// card 3 wedges at 6 h (from then on any step on it prints `aclrtSynchronizeStream failed: 507018` and exits 1
// after 5 s); step 0 is a flaky test failing with p = 0.05 (it has `retry: {max: 1, on: [flaky, card, infra]}`); the runs
// from the 80th to the 89th carry a real regression (their step 5 fails wherever it runs).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "config/job_file.h"
#include "engine/failure_evidence.h"
#include "sched/device_pool.h"

using namespace pto;

namespace {

struct Step {
  int run = 0, index = 0;
  double duration = 0;
  int attempt = 0;
  std::vector<int> avoid;
  bool red = false, done = false;
};

struct DayResult {
  int runs = 0, red_not_theirs = 0, red_flaky = 0, regression_runs = 0, regression_red = 0;
  int card3_failures = 0, card3_failures_before_drain = 0, retries = 0;
  double card3_minutes_lost = 0;
  bool card3_drained = false;
};

DayResult simulate(bool causes, unsigned seed) {
  const double kWedge = 6 * 3600, kEpoch = 1.8e9;
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(1.0 / 360);
  std::lognormal_distribution<double> dur(std::log(120.0), 0.5);
  std::uniform_real_distribution<double> coin(0, 1);
  // The runs and their steps.
  std::vector<double> arrival;
  std::vector<Step> steps;
  for (double t = 0; t < 12 * 3600; t += gap(rng)) {
    const int run = static_cast<int>(arrival.size());
    arrival.push_back(t);
    for (int i = 0; i < 6; ++i) steps.push_back({run, i, dur(rng)});
  }
  auto regression = [](int run) { return run >= 80 && run < 90; };
  // The real pool, for its charges and drains (its locks are never taken here).
  const std::string dir = (std::filesystem::temp_directory_path() / ("bench-health-" + std::to_string(::getpid()))).string();
  RunnerConfig cfg;
  cfg.lock_dir = dir + "/locks";
  HealthConfig& h = cfg.health;
  h.fault_patterns.push_back({"507018", std::make_shared<const std::regex>("507018"), FailureCause::Card, 0});
  DevicePool pool(cfg, dir + "/state");
  pool.init();
  RetryPolicy by_default, flaky_marked;
  flaky_marked.given = true;
  flaky_marked.max = 1;
  flaky_marked.on = {FailureCause::Flaky, FailureCause::Card, FailureCause::Infra};

  DayResult out;
  out.runs = static_cast<int>(arrival.size());
  std::vector<bool> red(arrival.size(), false), red_by_flake(arrival.size(), false);
  std::vector<std::size_t> queue;  // step indexes, FIFO
  std::multimap<double, std::pair<std::size_t, int>> running;  // end -> (step, card)
  std::set<int> busy;
  std::size_t next = 0;
  double t = 0;
  while (next < steps.size() || !queue.empty() || !running.empty()) {
    double at = 1e18;
    if (next < steps.size()) at = arrival[steps[next].run];
    if (!running.empty()) at = std::min(at, running.begin()->first);
    if (at >= 1e18) break;
    t = at;
    while (next < steps.size() && arrival[steps[next].run] <= t) queue.push_back(next++);
    while (!running.empty() && running.begin()->first <= t) {
      auto [i, card] = running.begin()->second;
      running.erase(running.begin());
      busy.erase(card);
      Step& s = steps[i];
      const bool wedged = card == 3 && t >= kWedge;
      int exit = 0;
      std::string log;
      if (wedged) exit = 1, log = "aclrtSynchronizeStream failed: 507018\n";
      else if (regression(s.run) && s.index == 5) exit = 1, log = "AssertionError: 3 != 4\n";
      else if (s.index == 0 && coin(rng) < 0.05) exit = 1, log = "AssertionError: flaky\n";
      if (exit == 0) {
        s.done = true;
        continue;
      }
      if (wedged) {
        ++out.card3_failures;
        out.card3_minutes_lost += 5.0 / 60;
        if (!pool.is_drained(3)) ++out.card3_failures_before_drain;
      }
      bool retried = false;
      if (causes) {
        FailureEvidence e = classify_failure({exit, 0, false, false, {card}}, h, log);
        const std::string run_id = "run" + std::to_string(s.run);
        if (e.cause == FailureCause::Code && !pool.failing_elsewhere(card, run_id, kEpoch + t).empty())
          e.cause = FailureCause::Card, e.cards = {card};
        if (e.cause == FailureCause::Card)
          for (int c : e.cards) pool.charge(c, run_id, "507018", kEpoch + t);
        const RetryPolicy& policy = s.index == 0 ? flaky_marked : by_default;
        if (policy.retries(e.cause, s.attempt)) {
          s.avoid.push_back(card);
          queue.insert(queue.begin(), i);  // its place in line
          retried = true;
          ++out.retries;
        }
      }
      if (!retried) {
        s.red = s.done = true;
        red[s.run] = true;
        if (s.index == 0 && !wedged) red_by_flake[s.run] = true;
      }
    }
    // Hand out free cards, lowest first, in submit order; never a drained card or one a retry avoids.
    for (auto it = queue.begin(); it != queue.end();) {
      Step& s = steps[*it];
      int got = -1;
      for (int c = 0; c < 8 && got < 0; ++c)
        if (!busy.count(c) && !pool.is_drained(c) && !std::count(s.avoid.begin(), s.avoid.end(), c)) got = c;
      if (got < 0) {
        ++it;
        continue;
      }
      busy.insert(got);
      ++s.attempt;
      const bool wedged = got == 3 && t >= kWedge;
      running.emplace(t + (wedged ? 5.0 : s.duration), std::make_pair(*it, got));
      it = queue.erase(it);
      if (busy.size() == 8) break;
    }
  }
  out.card3_drained = pool.is_drained(3);
  for (std::size_t r = 0; r < arrival.size(); ++r) {
    const bool theirs = regression(static_cast<int>(r));
    out.regression_runs += theirs;
    out.regression_red += theirs && red[r];
    if (red[r] && !theirs) (red_by_flake[r] ? out.red_flaky : out.red_not_theirs) += 1;
  }
  std::filesystem::remove_all(dir);
  return out;
}

}  // namespace

int main() {
  std::printf("a CI day with faults: 8 cards, a run of 6 steps every ~6 min for 12 h; card 3 wedges at 6 h; a flaky test (p=0.05);\n"
              "runs 80-89 carry a regression\n\n");
  std::printf("  %-34s %6s %28s %22s %26s %22s %10s\n", "behaviour", "runs", "red, not theirs (card) / flaky", "failures on card 3",
              "...before it was drained", "card-minutes lost to 3", "regression red");
  for (bool causes : {false, true}) {
    DayResult r = simulate(causes, 22);
    std::printf("  %-34s %6d %20d / %-7d %22d %26s %22.1f %6d of %d\n", causes ? "causes, card health, retry elsewhere" : "today (every failure red)",
                r.runs, r.red_not_theirs, r.red_flaky, r.card3_failures,
                causes ? std::to_string(r.card3_failures_before_drain).c_str() : "never drained", r.card3_minutes_lost,
                r.regression_red, r.regression_runs);
  }
  return 0;
}
