#pragma once
// One perf step's measurement in one run (SPEC "Performance, judged like an experiment"): a value handed from
// the engine (which measures) to the perf history (store/perf_history, which keeps it) and the readers.
#include <string>
#include <vector>

namespace pto {

struct PerfRecord {
  std::string metric, ref, card_type, unit;
  std::string run, step, commit;
  double at = 0;  // when it ended (epoch seconds)
  std::vector<double> samples;
  std::vector<double> base_samples;  // `compare: base`: the merge base's, paired with `samples`
  std::vector<int> cards;
  double median = 0;
  std::string verdict;  // the step's words
  std::string change;   // slower | faster | none | "" (not judged)
};

double median_of(std::vector<double> v);

}  // namespace pto
