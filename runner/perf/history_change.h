#pragma once
// HistoryChange (`perf: {compare: history}`, nightly jobs): has a metric changed on this ref and card type, and
// since which run? The series is each run's median, oldest first, the run being judged last. Card offsets
// (+-6% between cards of one type) and drift make run medians the unit, not samples: samples of one run on one
// card would make any card change look significant.
//
// First, did it change with the run judged: that run against every run before it (a two-sample t test on the
// log medians), at alpha / 2. Else, did it change earlier: the split into before and after (at least two runs
// after) with the smallest p, at alpha / 2 shared among the splits tried (Bonferroni). A change counts when it
// is significant and past the threshold; the verdict names the first run after the split, where it began.
#include <string>
#include <vector>

namespace pto {

struct RunMedian {
  std::string run;  // its id
  std::string commit;
  double median = 0;  // > 0; for a higher-is-better metric, pass 1/value: "slower" is always "worse"
};

struct HistoryVerdict {
  enum class Kind { Slower, Faster, NoChange, TooFew };
  Kind kind = Kind::TooFew;
  double change = 0;  // after against before: +0.12 is 12% slower
  double p = 1;       // Bonferroni-adjusted
  int before = 0, after = 0;  // runs on each side
  std::string since_run, since_commit;
  bool began_now = false;  // the change began with the run judged
  /// "slower by 12.1% since run R (commit C): 9 runs before, 3 after", "no change beyond +-5% over 12 runs".
  std::string text(double threshold) const;
};

struct HistoryOptions {
  double threshold = 0.05;
  double alpha = 0.05;  // a nightly job's false alarms: at most one run in 20
  int min_before = 3;  // runs needed before a change point (their spread is the noise)
};

HistoryVerdict judge_history(const std::vector<RunMedian>& series, const HistoryOptions& o);

}  // namespace pto
