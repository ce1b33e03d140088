#pragma once
// `perf:` on a step or a model example (SPEC "Performance, judged like an experiment"): the step's output gives
// one number per sample, and the samples are judged against the merge base's build on the same card (`compare:
// base`, perf/paired_comparison) or against the ref's history on the same card type (`compare: history`).
#include <memory>
#include <optional>
#include <string>

#include "config/diagnostics.h"
#include "config/yaml_map.h"

namespace pto {

struct PerfSpec {
  enum class Compare { Base, History };
  std::string name;    // the metric's name in the history, the API and `bisect --metric` (default: the step's name)
  std::string metric;  // a POSIX extended regex (grep -E) with one group, the number: `Total Test Time: ([0-9.]+) us`
  /// Compiled once. POSIX's matcher (glibc's) has no catastrophic backtracking and no recursion as deep as its
  /// input: the regex comes from the commit under test and meets its output, both a pull request's to choose.
  class Pattern;
  std::shared_ptr<const Pattern> pattern;
  std::string unit;
  bool lower_is_better = true;  // `better: lower|higher`
  int samples = 0;              // at most this many pairs (base) or this many samples (history); 0: the default
  Compare compare = Compare::Base;
  double threshold_pct = 5;
  bool gate = false;  // a significant change for the worse beyond the threshold makes the step red
  SourceLoc loc;

  int sample_count() const { return samples > 0 ? samples : compare == Compare::Base ? 16 : 5; }
  /// The number the last match of `metric` on a line of `output` gives (its group), if any; lines longer than
  /// 4 KiB are passed over.
  std::optional<double> read(const std::string& output) const;
};

/// Reads a `perf:` mapping; errors at their lines: a regex that does not compile (POSIX extended) or has not exactly one group
/// (`perf-metric`), unknown keys, values out of range.
std::optional<PerfSpec> read_perf(const YAML::Node& node, const std::string& file, Diagnostics& diags);

}  // namespace pto
