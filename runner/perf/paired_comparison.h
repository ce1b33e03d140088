#pragma once
// PairedComparison (`perf: {compare: base}`, bisect/base_comparisons): is B (a pull request's build) slower
// than A (its merge base's)? Samples come in pairs measured back to back on one card (A B A B ...), so the
// card's own speed and a slow drift cancel in each pair's log ratio ln(B/A).
//
// Timing noise is multiplicative (log-normal): the log ratios are then normal, and a t interval of their mean
// is exact and the most efficient one. Its spread is estimated from each build's own samples (pooled, 2n - 2
// degrees of freedom, twice the pairs' n - 1: at 4 pairs that is the difference between stopping and not).
// (Wilcoxon's signed-rank test was the other candidate: distribution-free, but its smallest two-sided p with 6
// pairs is 1/32, so it could never stop a 20% regression within 6 pairs.)
//
// Sequential: looked at after `min_pairs` pairs and every `step` pairs after, up to `max_pairs`. Each look tests
// at a level of a power family (strict early, loosest at the last), so early looks stop only on strong evidence
// and the whole sequence keeps a false alarm ("slower" with no change) within `alpha` (measured:
// bench/bench_perf_stats.cpp). It stops once the interval is clear of 0 (slower or faster: significant), or
// inside +-threshold (no change beyond it); at `max_pairs` it says what it has. The interval reported is the
// 95% two-sided t interval at the stop, in percent of A.
#include <optional>
#include <string>
#include <vector>

namespace pto {

struct PerfVerdict {
  enum class Kind { Slower, Faster, NoChange, Inconclusive };
  Kind kind = Kind::Inconclusive;
  double change = 0, low = 0, high = 0;  // B against A: +0.098 is 9.8% slower (lower-is-better metrics)
  int pairs = 0;
  bool beyond_threshold = false;  // a significant change whose estimate is past the threshold (a gate's red)
  double threshold = 0;           // the comparison's (0.04 is +-4%)
  /// "slower by 9.8% (95% CI 6.1% to 13.4%) on card 3, 12 pairs", "no change beyond +-4.0%: 0.3% (95% CI -3.1% to
  /// 3.8%) on card 3, 16 pairs".
  std::string text(const std::string& card = "") const;
};

class PairedComparison {
 public:
  struct Options {
    double threshold = 0.04;  // threshold-pct / 100
    int min_pairs = 4, max_pairs = 16, step = 2;
    double alpha = 0.05;  // one-sided: a false "slower" at most this often
  };
  explicit PairedComparison(Options o) : o_(o) {}
  /// One pair: A's and B's number (both > 0).
  void add(double a, double b);
  int pairs() const { return static_cast<int>(d_.size()); }
  /// At a look (every `step` pairs from `min_pairs`): the verdict to stop with, or nothing (measure more).
  /// At `max_pairs` always a verdict.
  std::optional<PerfVerdict> look() const;

 private:
  PerfVerdict verdict(PerfVerdict::Kind kind) const;
  Options o_;
  std::vector<double> a_, b_, d_;  // ln a, ln b, ln(b / a)
};

}  // namespace pto
