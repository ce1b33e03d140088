// Scheduling quality on a simulated day of CI: the real scheduler policy (sched/scheduler.cpp) driven by a
// discrete-event simulation with a virtual clock, side by side with plain FIFO and with backfill without
// reservation, on the same workload.
//
// Workload: CI runs arrive over 14 hours (Poisson, every ~24 min); each run submits 10-20 steps at once with a 1/2/4/8-card
// mix and heavy-tailed (lognormal) durations. Two pools: 8 cards without groups (all sizes), and 8 cards in
// groups of 2 (sizes 1 and 2 only, since no group can serve 4 or 8).
// Lower bound on makespan, valid for any scheduler, even one that knows the future: the latest
// arrival + duration of any step, and for every arrival time t, t + (card-seconds arriving at or after t) /
// cards (work that has not arrived cannot run). The second term at the first arrival is the classic
// card-seconds / cards bound.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include <chrono>
#include <string>

#include "baseline_policies.h"
#include "run_day.h"
#include "testcases/shard_split.h"
#include "sched/queue_order.h"
#include "sched/scheduler.h"
#include "sched/start_forecast.h"
#include "store/learned_durations.h"

using namespace pto;
using pto::bench::SchedPolicy;
using pto::bench::schedule_with_policy;

struct Step {
  std::uint64_t id;
  int devices;
  double arrival, duration;
  double start = -1;
  double estimate = -1;  // what the scheduler is told (-1: the exact duration; 0: unknown)
};

struct Result {
  double makespan = 0, bound = 0, worst_multi_wait = 0, mean_wait = 0;
  int unfinished = 0;
};

Result simulate(SchedPolicy policy, std::vector<Step> steps, int ncards, const std::vector<std::vector<int>>& groups) {
  std::vector<double> busy_until(ncards, 0);  // 0 = free at t
  std::vector<bool> busy(ncards, false);
  std::vector<std::pair<double, std::vector<int>>> running;  // end time, cards
  std::map<std::uint64_t, Step*> by_id;
  for (auto& s : steps) by_id[s.id] = &s;
  std::size_t next_arrival = 0;
  std::vector<Step*> queue;
  double t = 0;
  std::size_t done = 0;
  while (done < steps.size()) {
    // Next event: an arrival or a completion.
    double next = 1e18;
    if (next_arrival < steps.size()) next = steps[next_arrival].arrival;
    for (const auto& r : running) next = std::min(next, r.first);
    if (next >= 1e18) break;  // nothing can ever happen again (starved)
    t = next;
    while (next_arrival < steps.size() && steps[next_arrival].arrival <= t) queue.push_back(&steps[next_arrival++]);
    for (auto it = running.begin(); it != running.end();) {
      if (it->first <= t) {
        for (int c : it->second) busy[c] = false;
        ++done;
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<SchedCard> cards;
    for (int c = 0; c < ncards; ++c) cards.push_back({c, true, !busy[c], busy[c] ? "x" : "", busy[c] ? busy_until[c] : 0, ""});
    std::vector<SchedRequest> reqs;
    for (auto* s : queue) reqs.push_back({s->id, s->devices, "", s->estimate < 0 ? s->duration : s->estimate, ""});
    ScheduleResult r = schedule_with_policy(policy, cards, groups, reqs, t);
    for (const auto& a : r.start) {
      Step* s = by_id[a.request];
      s->start = t;
      for (int c : a.cards) busy[c] = true, busy_until[c] = s->estimate == 0 ? 1e18 : t + (s->estimate > 0 ? s->estimate : s->duration);
      running.push_back({t + s->duration, a.cards});
      queue.erase(std::find(queue.begin(), queue.end(), s));
    }
  }
  Result res;
  double work = 0, latest = 0, first = 1e18, waits = 0;
  int started = 0;
  for (const auto& s : steps) {
    work += s.devices * s.duration;
    latest = std::max(latest, s.arrival + s.duration);
    first = std::min(first, s.arrival);
    if (s.start < 0) {
      ++res.unfinished;
      continue;
    }
    res.makespan = std::max(res.makespan, s.start + s.duration);
    double wait = s.start - s.arrival;
    waits += wait;
    ++started;
    if (s.devices > 1) res.worst_multi_wait = std::max(res.worst_multi_wait, wait);
  }
  res.bound = std::max(latest, first + work / ncards);
  // Work arriving at or after each arrival time t cannot finish before t + that work / cards.
  std::vector<std::pair<double, double>> arrivals;  // (time, card-seconds)
  for (const auto& s : steps) arrivals.emplace_back(s.arrival, s.devices * s.duration);
  std::sort(arrivals.begin(), arrivals.end());
  double suffix = 0;
  for (auto it = arrivals.rbegin(); it != arrivals.rend(); ++it) {
    suffix += it->second;
    res.bound = std::max(res.bound, it->first + suffix / ncards);
  }
  res.mean_wait = started ? waits / started : 0;
  return res;
}

std::vector<Step> workload(unsigned seed, bool large_gangs) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(1.0 / (24 * 60));  // a run every ~24 minutes, offered load ~0.9
  std::uniform_int_distribution<int> nsteps(10, 20);
  std::lognormal_distribution<double> dur(std::log(4 * 60.0), 0.9);  // median 4 min, long tail
  std::discrete_distribution<int> size_all({60, 25, 10, 5});          // 1, 2, 4, 8 cards
  std::discrete_distribution<int> size_grouped({70, 30});             // 1, 2 cards
  std::vector<Step> steps;
  double t = 0;
  std::uint64_t id = 1;
  while (t < 14 * 3600) {
    int n = nsteps(rng);
    for (int i = 0; i < n; ++i) {
      int devices = large_gangs ? (1 << size_all(rng)) : (1 << size_grouped(rng));
      steps.push_back({id++, devices, t, std::min(dur(rng), 4 * 3600.0)});
    }
    t += gap(rng);
  }
  return steps;
}

// Starvation stress: 2 cards, 1-card steps arriving every ~3 minutes (5-minute median), so one card is
// nearly always busy, and a 2-card step every 90 minutes.
std::vector<Step> stream_workload(unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(1.0 / (3 * 60));
  std::lognormal_distribution<double> dur(std::log(5 * 60.0), 0.5);
  std::vector<Step> steps;
  std::uint64_t id = 1;
  double next_big = 30 * 60;
  for (double t = 0; t < 14 * 3600; t += gap(rng)) {
    if (t >= next_big) {
      steps.push_back({id++, 2, t, 10 * 60});
      next_big += 90 * 60;
    }
    steps.push_back({id++, 1, t, dur(rng)});
  }
  return steps;
}

// One big run: 500 steps submitted at once (a matrix of model examples), 1/2/4/8-card mix.
std::vector<Step> batch_workload(unsigned seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> dur(std::log(4 * 60.0), 0.9);
  std::discrete_distribution<int> size({60, 25, 10, 5});
  std::vector<Step> steps;
  for (std::uint64_t id = 1; id <= 500; ++id) steps.push_back({id, 1 << size(rng), 0, std::min(dur(rng), 3600.0)});
  return steps;
}

void report(const char* title, const std::vector<Step>& steps, int ncards, const std::vector<std::vector<int>>& groups) {
  const char* names[] = {"reserve+backfill (pto-runner)", "plain FIFO", "backfill, no reservation"};
  SchedPolicy policies[] = {SchedPolicy::ReserveAndBackfill, SchedPolicy::Fifo, SchedPolicy::GreedyBackfill};
  double work = 0;
  for (const auto& s : steps) work += s.devices * s.duration;
  std::printf("\n%s: %zu steps, %.0f card-hours\n", title, steps.size(), work / 3600);
  std::printf("  %-32s %11s %8s %24s %14s %8s\n", "policy", "makespan h", "/ bound", "worst multi-card wait", "mean wait min",
              "starved");
  for (int p = 0; p < 3; ++p) {
    Result r = simulate(policies[p], steps, ncards, groups);
    std::printf("  %-32s %11.2f %8.3f %22.1f min %14.1f %8d\n", names[p], r.makespan / 3600, r.makespan / r.bound,
                r.worst_multi_wait / 60, r.mean_wait / 60, r.unfinished);
  }
}

// Issue 10: pypto's definitions carry no expected-minutes. A day of runs of the same 40 steps (each a step key
// with its own size and typical duration, every run of it noisy around that); the scheduler is told, per
// variant: the exact duration of this very run (an oracle), the p90 of the step's 20 previous runs (what
// pto-runner learns, store/learned_durations), or nothing (the state without estimates).
// SEEDS=N prints one line per day for N days of each pool instead of the two tables.
void learned_report(unsigned seed, int ncards, const std::vector<std::vector<int>>& groups, bool large_gangs) {
  std::mt19937 rng(seed);
  struct Kind { int devices; double typical; };
  std::vector<Kind> kinds;
  std::lognormal_distribution<double> typical(std::log(4 * 60.0), 0.9);
  std::discrete_distribution<int> size_all({60, 25, 10, 5}), size_grouped({70, 30});
  for (int k = 0; k < 40; ++k)
    kinds.push_back({large_gangs ? 1 << size_all(rng) : 1 << size_grouped(rng), std::min(typical(rng), 2 * 3600.0)});
  std::lognormal_distribution<double> noise(0, 0.3);  // one run of a step vs its typical duration
  std::exponential_distribution<double> gap(1.0 / (24 * 60));
  std::uniform_int_distribution<int> nsteps(10, 20), pick(0, 39);
  std::vector<Step> exact;
  std::vector<double> learned;
  std::vector<std::vector<double>> history(kinds.size());
  for (auto& h : history)
    for (int i = 0; i < 20; ++i) h.push_back(0);
  for (std::size_t k = 0; k < kinds.size(); ++k)
    for (auto& x : history[k]) x = kinds[k].typical * noise(rng);
  std::uint64_t id = 1;
  for (double t = 0; t < 14 * 3600; t += gap(rng)) {
    int n = nsteps(rng);
    for (int i = 0; i < n; ++i) {
      int k = pick(rng);
      double d = kinds[k].typical * noise(rng);
      exact.push_back({id++, kinds[k].devices, t, d});
      learned.push_back(percentile(history[k], kLearnedPercentile));
      history[k].erase(history[k].begin());  // the newest 20 runs (the learned estimate lags one day behind)
      history[k].push_back(d);
    }
  }
  std::vector<Step> with_learned = exact, without = exact;
  for (std::size_t i = 0; i < exact.size(); ++i) with_learned[i].estimate = learned[i], without[i].estimate = 0;
  Result e = simulate(SchedPolicy::ReserveAndBackfill, exact, ncards, groups);
  Result l = simulate(SchedPolicy::ReserveAndBackfill, with_learned, ncards, groups);
  Result w = simulate(SchedPolicy::ReserveAndBackfill, without, ncards, groups);
  if (getenv("SEEDS")) {
    std::printf("seed %u: makespan %.3f, worst multi wait learned %.1f exact %.1f none %.1f\n", seed, l.makespan / e.makespan,
                l.worst_multi_wait / 60, e.worst_multi_wait / 60, w.worst_multi_wait / 60);
    return;
  }
  std::printf("\nlearned estimates, %d cards%s, %zu steps of 40 recurring steps\n", ncards, groups.empty() ? "" : " in groups of 2",
              exact.size());
  std::printf("  %-34s %11s %8s %24s %14s\n", "scheduler told", "makespan h", "/ exact", "worst multi-card wait", "mean wait min");
  for (auto [name, r] : {std::pair<const char*, Result>{"the exact duration (oracle)", e}, {"p90 of the last 20 runs (learned)", l},
                         {"nothing (no estimates)", w}})
    std::printf("  %-34s %11.2f %8.3f %20.1f min %14.1f\n", name, r.makespan / 3600, r.makespan / e.makespan,
                r.worst_multi_wait / 60, r.mean_wait / 60);
}

// Issue 23: the same workloads as runs (the steps of one arrival are one run), under submit order (today's
// policy) and with fair share between runs: the makespan must stay within 5%.
std::vector<pto::bench::DayRun> as_runs(const std::vector<Step>& steps) {
  std::vector<pto::bench::DayRun> runs;
  for (const auto& s : steps) {
    if (runs.empty() || runs.back().arrival != s.arrival)
      runs.push_back({"run" + std::to_string(runs.size()), 0, s.arrival, {}, -1});
    runs.back().steps.push_back({s.devices, s.duration});
  }
  return runs;
}

double makespan_of(const std::vector<pto::bench::DayRun>& runs) {
  double m = 0;
  for (const auto& r : runs) m = std::max(m, r.finished);
  return m;
}

void fair_share_makespans() {
  std::printf("\nfair share between runs vs submit order, same workloads (steps of one arrival = one run)\n");
  std::printf("  %-60s %12s %12s %8s\n", "workload", "submit order", "fair share", "ratio");
  struct W { const char* name; std::vector<Step> steps; int cards; std::vector<std::vector<int>> groups; };
  std::vector<W> ws = {{"8 cards, 1/2/4/8-card mix", workload(42, true), 8, {}},
                       {"8 cards in groups of 2, 1/2-card mix", workload(42, false), 8, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
                       {"one run of 500 steps", batch_workload(3), 8, {}},
                       {"starvation stress (2 cards)", stream_workload(7), 2, {}}};
  for (auto& w : ws) {
    auto today = as_runs(w.steps), fair = as_runs(w.steps);
    pto::bench::simulate_day(today, {w.cards, w.groups, false, false});
    pto::bench::simulate_day(fair, {w.cards, w.groups, true, false});
    std::printf("  %-60s %10.2f h %10.2f h %8.3f\n", w.name, makespan_of(today) / 3600, makespan_of(fair) / 3600,
                makespan_of(fair) / makespan_of(today));
  }
}

// A day of pypto's CI as issue 23 describes it: pull requests' runs, small (4-12 one-card steps) and large
// (150-250 steps, a model matrix), and pushes to main (40 steps), arriving over 12 hours on 8 cards. Times from
// submission to a run's last result, today (submit order) and with priorities and fair share; and the start
// forecast's error against each step's real start, with exact and with noisy (learned-like) estimates.
double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
}

std::vector<pto::bench::DayRun> ci_day(unsigned seed, bool noisy_estimates) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(1.0 / (9 * 60));
  std::lognormal_distribution<double> dur(std::log(40.0), 0.7), noise(0, 0.3);
  std::uniform_int_distribution<int> small_n(4, 12), large_n(150, 250);
  std::discrete_distribution<int> kind({70, 15, 15});  // small PR, large PR, main
  std::vector<pto::bench::DayRun> runs;
  int i = 0;
  for (double t = 0; t < 12 * 3600; t += gap(rng), ++i) {
    int k = kind(rng);
    pto::bench::DayRun r{(k == 0 ? "small" : k == 1 ? "large" : "main") + std::to_string(i), k == 2 ? 10 : 0, t, {}, -1};
    int n = k == 0 ? small_n(rng) : k == 1 ? large_n(rng) : 40;
    for (int s = 0; s < n; ++s) {
      double d = dur(rng);
      r.steps.push_back({s % 10 == 9 ? 2 : 1, d, noisy_estimates ? d * noise(rng) : -1});
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

void ci_day_report() {
  std::printf("\na CI day on 8 cards: PR runs (small 4-12 steps, large 150-250) and main runs (40 steps, priority 10), 12 h\n");
  for (bool fair : {false, true}) {
    auto runs = ci_day(23, false);
    pto::bench::simulate_day(runs, {8, {}, fair, false});
    std::vector<double> small, large, main;
    for (const auto& r : runs)
      (r.id.rfind("small", 0) == 0 ? small : r.id.rfind("large", 0) == 0 ? large : main).push_back((r.finished - r.arrival) / 60);
    std::printf("  %-34s small PR p50 %6.1f p90 %6.1f min | main p50 %6.1f p90 %6.1f min | large PR p50 %6.1f p90 %6.1f | makespan %.2f h\n",
                fair ? "priorities + fair share" : "today (submit order)", pct(small, .5), pct(small, .9), pct(main, .5), pct(main, .9),
                pct(large, .5), pct(large, .9), makespan_of(runs) / 3600);
  }
  for (bool noisy : {false, true}) {
    auto runs = ci_day(23, noisy);
    pto::bench::simulate_day(runs, {8, {}, true, true});
    std::vector<double> err, rel;
    int within = 0, n = 0;
    for (const auto& r : runs)
      for (const auto& s : r.steps) {
        double wait = s.start - r.arrival;
        err.push_back(std::abs(s.predicted - s.start) / 60);
        if (wait > 1) rel.push_back(std::abs(s.predicted - s.start) / wait);
        within += std::abs(s.predicted - s.start) <= 0.1 * wait + 1e-6;
        ++n;
      }
    std::printf("  ETA at submission, %-18s error p50 %5.1f min p90 %5.1f min | relative to the wait p50 %4.2f p90 %4.2f | within 10%%: %d%% of steps\n",
                noisy ? "noisy estimates:" : "exact estimates:", pct(err, .5), pct(err, .9), pct(rel, .5), pct(rel, .9), 100 * within / n);
  }
  // What one forecast costs the daemon's thread: a queue of 1,000 steps of 5 runs on 8 busy cards.
  std::vector<SchedCard> cards;
  for (int c = 0; c < 8; ++c) cards.push_back({c, true, false, "x", 30.0 + c, ""});
  std::vector<SchedRequest> q;
  static const std::string shares[] = {"a", "b", "c", "d", "e"};
  for (std::uint64_t id = 1; id <= 1000; ++id) q.push_back({id, id % 10 == 0 ? 2 : 1, "", 60.0 + id % 50, "", nullptr, shares[id % 5], 0});
  auto t0 = std::chrono::steady_clock::now();
  auto f = forecast_starts(cards, {}, q, ShareLedger{}, 0);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  one forecast of a 1,000-step queue (5 runs, 8 cards): %.1f ms, %zu starts\n", ms, f.size());
}

// Issue 33: a CI day whose steps also ask for the host's CPUs (8 cards, 64 CPUs): PR and main runs of 1-card
// steps (4 CPUs each), every tenth a 2-card step (8 CPUs), and in each run compile-heavy steps without a card
// (32 CPUs, as system-tests' --precompile-workers=32) and simulator steps (8 CPUs, no card). The makespan against
// a lower bound (the larger of card-time / 8 and CPU-time / 64, and of each run's arrival plus its longest step),
// and the waits of 2-card steps; then a stress: a stream of 32-CPU compile steps and a 2-card step asking 32 CPUs
// every 90 minutes, whose waits must stay bounded (no starvation).
std::vector<pto::bench::DayRun> cpu_day(unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(1.0 / (5 * 60));  // ~80% of the CPUs' time asked for
  std::lognormal_distribution<double> dur(std::log(40.0), 0.7), compile(std::log(300.0), 0.5);
  std::uniform_int_distribution<int> n_steps(6, 30);
  std::vector<pto::bench::DayRun> runs;
  int i = 0;
  for (double t = 0; t < 12 * 3600; t += gap(rng), ++i) {
    pto::bench::DayRun r{"run" + std::to_string(i), i % 7 == 0 ? 10 : 0, t, {}, -1};
    r.steps.push_back({0, compile(rng), -1});  // the compile of its test suite
    r.steps.back().cpus = 32;
    r.steps.push_back({0, dur(rng) * 3, -1});  // a simulator step
    r.steps.back().cpus = 8;
    const int n = n_steps(rng);
    for (int s = 0; s < n; ++s) {
      r.steps.push_back({s % 10 == 9 ? 2 : 1, dur(rng), -1});
      r.steps.back().cpus = s % 10 == 9 ? 8 : 4;
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

void cpu_day_report() {
  std::printf("\nCPUs beside cards (issue 33): 8 cards and 64 CPUs, runs of 1-card (4 CPUs), 2-card (8 CPUs), compile (32 CPUs, no card)\n"
              "and simulator (8 CPUs, no card) steps, 12 h; the same day with CPUs not scheduled (64 CPUs oversubscribed) beside it\n");
  for (int cpus : {64, 0}) {
    auto runs = cpu_day(33);
    pto::bench::simulate_day(runs, {8, {}, true, false, cpus});
    double card_time = 0, cpu_time = 0, bound = 0;
    std::vector<double> two_card_waits, one_card_waits;
    int most_cpus = 0;
    std::vector<std::pair<double, int>> deltas;
    for (const auto& r : runs) {
      double longest = 0;
      for (const auto& s : r.steps) {
        card_time += s.devices * s.duration, cpu_time += s.cpus * s.duration, longest = std::max(longest, s.duration);
        if (s.devices == 2) two_card_waits.push_back((s.start - r.arrival) / 60);
        if (s.devices == 1) one_card_waits.push_back((s.start - r.arrival) / 60);
        deltas.push_back({s.start, s.cpus}), deltas.push_back({s.start + s.duration, -s.cpus});
      }
      bound = std::max(bound, r.arrival + longest);
    }
    std::sort(deltas.begin(), deltas.end());
    int now = 0;
    for (const auto& [t, d] : deltas) now += d, most_cpus = std::max(most_cpus, now);
    bound = std::max({bound, card_time / 8, cpu_time / 64});
    std::printf("  %-22s makespan %.2f h, bound %.2f h, ratio %.3f (CPU-time / 64 CPUs: %.2f h) | wait p50/p90/max: 2-card %.1f/%.1f/%.1f,"
                " 1-card %.1f/%.1f/%.1f min | CPUs asked at once: at most %d\n",
                cpus ? "CPUs scheduled (64):" : "CPUs not scheduled:", makespan_of(runs) / 3600, bound / 3600, makespan_of(runs) / bound,
                cpu_time / 64 / 3600, pct(two_card_waits, .5), pct(two_card_waits, .9), pct(two_card_waits, 1), pct(one_card_waits, .5),
                pct(one_card_waits, .9), pct(one_card_waits, 1), most_cpus);
  }
  // The stress: 2 cards, 64 CPUs; a 32-CPU compile step every 3 min (each 5 min: two at a time use every CPU,
  // 83% of them asked for), and a 2-card step asking 32 CPUs every 90 min.
  std::vector<pto::bench::DayRun> runs;
  for (int k = 0; k < 240; ++k) {
    pto::bench::DayRun r{"c" + std::to_string(k), 0, k * 180.0, {{0, 300, -1}}, -1};
    r.steps[0].cpus = 32;
    runs.push_back(std::move(r));
  }
  for (int k = 0; k < 8; ++k) {
    pto::bench::DayRun r{"big" + std::to_string(k), 0, 600 + k * 5400.0, {{2, 600, -1}}, -1};
    r.steps[0].cpus = 32;
    runs.push_back(std::move(r));
  }
  pto::bench::simulate_day(runs, {2, {}, true, false, 64});
  std::vector<double> big_waits;
  for (const auto& r : runs)
    if (r.id.rfind("big", 0) == 0) big_waits.push_back((r.steps[0].start - r.arrival) / 60);
  std::vector<double> compile_waits;
  for (const auto& r : runs)
    if (r.id.rfind("c", 0) == 0) compile_waits.push_back((r.steps[0].start - r.arrival) / 60);
  std::printf("  stress, 32-CPU compile steps every 3 min and a 2-card 32-CPU step every 90 min: the 2-card steps' wait max %.1f min,"
              " the compile steps' p90 %.1f max %.1f min (a compile step lasts 5 min)\n", pct(big_waits, 1), pct(compile_waits, .9), pct(compile_waits, 1));
}

// Tests split across shards (issue 33): durations shaped like pypto's system tests (894 tests in 60 files, a
// few files holding the long kernels), learned with noise (what a test took last time is not what it takes
// now, +-20%) and 5% of tests new (no duration: the median). The split by learned duration against pypto's
// split by counting files, by the slowest shard over the mean of the real durations.
void shard_balance_report() {
  std::printf("\ntests split across shards (issue 33): 894 tests in 60 files, 20 seeds; slowest shard / mean shard by the real durations\n");
  for (int shards : {2, 4, 8}) {
    std::vector<double> by_duration, by_files;
    for (unsigned seed = 1; seed <= 20; ++seed) {
      std::mt19937 rng(seed);
      std::lognormal_distribution<double> short_s(std::log(2.0), 0.7), long_s(std::log(90.0), 0.6);
      std::normal_distribution<double> noise(1.0, 0.1);
      std::uniform_real_distribution<double> u(0, 1);
      std::vector<std::string> ids;
      std::map<std::string, double> real, learned;
      for (int f = 0; f < 60; ++f) {
        const bool heavy = u(rng) < 0.1;  // 6 of 60 files hold the long kernels
        for (int t = 0; t < 12 + f % 7; ++t) {
          ids.push_back("tests/st/d" + std::to_string(f / 8) + "/test_" + std::to_string(f) + ".py::case[" + std::to_string(t) + "]");
          const double d = heavy && t < 4 ? long_s(rng) : short_s(rng);
          real[ids.back()] = d;
          if (u(rng) >= 0.05) learned[ids.back()] = std::max(0.0, d * std::clamp(noise(rng), 0.6, 1.4));
        }
      }
      by_duration.push_back(pto::shard_imbalance(pto::split_by_duration(ids, learned, shards), real));
      by_files.push_back(pto::shard_imbalance(pto::split_by_file_count(ids, real, shards), real));
    }
    std::printf("  %d shards (~%d tests each): by learned duration p50 %.3f worst %.3f | by file count p50 %.3f worst %.3f\n", shards,
                894 / shards, pct(by_duration, .5), pct(by_duration, 1), pct(by_files, .5), pct(by_files, 1));
  }
}

int main() {
  if (getenv("SPLIT_ONLY")) {
    shard_balance_report();
    return 0;
  }
  if (getenv("CPU_ONLY")) {
    cpu_day_report();
    return 0;
  }
  if (getenv("QUEUE_ONLY")) {
    fair_share_makespans();
    ci_day_report();
    return 0;
  }
  report("8 cards, no groups, 1/2/4/8-card mix, heavy-tailed durations", workload(42, true), 8, {});
  report("8 cards in groups of 2, 1/2-card mix", workload(42, false), 8, {{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  report("one run of 500 steps submitted at once, 8 cards, 1/2/4/8-card mix", batch_workload(3), 8, {});
  report("starvation stress: 2 cards, stream of 1-card steps, a 2-card step every 90 min", stream_workload(7), 2, {});
  if (getenv("SEEDS")) {
    for (unsigned seed = 11; seed < 11 + static_cast<unsigned>(atoi(getenv("SEEDS"))); ++seed) {
      learned_report(seed, 8, {}, true);
      learned_report(seed + 100, 8, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}, false);
    }
    return 0;
  }
  learned_report(11, 8, {}, true);
  learned_report(12, 8, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}, false);
  fair_share_makespans();
  ci_day_report();
  cpu_day_report();
  shard_balance_report();
  return 0;
}
