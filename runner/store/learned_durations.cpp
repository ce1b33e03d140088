#include "store/learned_durations.h"

#include <algorithm>
#include <cmath>

namespace pto {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
  return samples[std::min(std::max<std::size_t>(rank, 1), samples.size()) - 1];
}

void apply_learned_durations(Plan& plan, const Journal& journal) {
  auto asks = [](const PlanStep& s) { return s.expected_defaulted && s.kind == StepKind::Command; };
  std::vector<std::string> keys;
  for (const auto& job : plan.jobs)
    for (const auto& s : job.steps)
      if (asks(s)) keys.push_back(s.key);
  const auto learned = journal.durations(keys);  // one query for the plan
  for (auto& job : plan.jobs)
    for (auto& s : job.steps) {
      if (!asks(s)) continue;
      auto found = learned.find(s.key);
      if (found == learned.end()) continue;
      const std::vector<double>& history = found->second;
      if (static_cast<int>(history.size()) < kMinDurationSamples) continue;
      s.expected_minutes = percentile(history, kLearnedPercentile) / 60;
      s.expected_defaulted = false;
      s.expected_source = "history";
      s.expected_samples = static_cast<int>(history.size());
    }
}

}  // namespace pto
