#pragma once
// A day of CI runs on one host, on a virtual clock: the discrete-event simulation the queue's figures
// (bench_schedule) and tests (tests/queue_order_test.cpp) share. Each run arrives with all its steps queued at
// once (a matrix of model examples); cards free when a step's real duration is over; the scheduler is told each
// step's estimate. Two policies: today's until issue 23 (every step in submit order, sched/scheduler alone) and
// pto-runner's (sched/queue_order's priorities and fair share between runs, the ShareLedger charged as the
// dispatcher charges it). With `forecast`, each run's steps get the expected start sched/start_forecast gave
// them at their run's arrival, to compare with when they really started.
#include <string>
#include <vector>

namespace pto::bench {

struct DayStep {
  int devices = 1;
  double duration = 60;
  double estimate = -1;  // what the scheduler is told; -1: the exact duration, 0: unknown
  double start = -1, predicted = -1;
  std::vector<int> cards;  // where it ran
  int cpus = 0;            // what it asks of the host's CPUs (DayOptions::cpus)
};

struct DayRun {
  std::string id;
  int priority = 0;
  double arrival = 0;
  std::vector<DayStep> steps;
  double finished = -1;  // its last step's end
};

struct DayOptions {
  int cards = 8;
  std::vector<std::vector<int>> groups;
  bool fair_share = true;  // false: today's policy (submit order, no priorities)
  bool forecast = false;
  int cpus = 0;  // the host's CPUs, granted with the cards (sched/scheduler SchedHost); 0: not scheduled
};

/// Plays `runs` (any order) through to their end; fills start, cards, predicted and finished.
void simulate_day(std::vector<DayRun>& runs, const DayOptions& options);

}  // namespace pto::bench
