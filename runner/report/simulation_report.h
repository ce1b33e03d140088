#pragma once
// The `run --simulate` report: per-card timelines and the summary figures (makespan, card utilisation,
// deduplicated steps, and the time the same work takes run step after step, as GitHub Actions runs a job).
#include <string>

#include "engine/run_state.h"
#include "plan/plan.h"

namespace pto {

struct SimulationSummary {
  double makespan = 0;          // simulated seconds, first start to last end
  double serial = 0;            // sum of every executed step's duration, simulated seconds
  double card_busy = 0;         // card-seconds held by steps
  double utilisation = 0;       // card_busy / (cards * makespan)
  int steps_run = 0;
  int deduplicated = 0;
  int cards = 0;
};

/// `time_scale` converts engine seconds back into simulated seconds.
SimulationSummary summarize_simulation(const RunRecord& r, const Plan& p, int cards, double time_scale);
std::string simulation_report(const RunRecord& r, const Plan& p, const std::vector<int>& card_ids, double time_scale);

}  // namespace pto
