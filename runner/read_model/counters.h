#pragma once
// The counters and histograms behind /metrics, part of the read model: the daemon's engine thread counts into
// them (store/run_reporter, the lease book's ends, the run history), /metrics renders them
// (server/metrics). Plain values, no rendering here.
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pto {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<long long>& counts() const { return counts_; }  // per bucket, not cumulative; last is +Inf
  double sum() const { return sum_; }
  long long count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<long long> counts_;
  double sum_ = 0;
  long long count_ = 0;
};

/// Histograms of one metric by the value of one label (a step's result, how a lease ended).
class LabelledHistogram {
 public:
  explicit LabelledHistogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {}
  void observe(const std::string& label_value, double v);
  const std::map<std::string, Histogram>& by_label() const { return by_label_; }

 private:
  std::vector<double> bounds_;
  std::map<std::string, Histogram> by_label_;
};

struct Metrics {
  Histogram wait_seconds{{0.01, 0.1, 1, 10, 60, 300, 900, 1800, 3600, 7200}};
  LabelledHistogram step_seconds{{1, 10, 60, 300, 600, 1200, 1800, 3600, 7200}};   // by result
  LabelledHistogram lease_seconds{{0.1, 1, 10, 60, 300, 600, 1800, 3600, 7200}};  // by how it ended
  std::map<std::string, long long> steps_by_result;
  std::map<std::string, long long> failures_by_cause;  // failed attempts of steps
  std::map<std::string, long long> retries_by_cause;   // the attempts that followed them
  std::map<std::string, long long> runs_by_result;
  std::map<std::string, long long> leases_by_end;
  std::map<std::string, long long> tests_by_result;  // each finished step's tests, by their last result
  int tests_muted = 0;  // mutes in force now
  int tests_flaky = 0;  // tests flaky on some ref within tests.window-days (from the test history)
  bool journal_failing = false;
  /// The named caches (caches/): what each holds on disk (measured when retention prunes them) and its
  /// ccaches' hits and misses over finished steps.
  std::map<std::string, unsigned long long> cache_bytes;
  std::map<std::string, long long> cache_hits, cache_misses;
  /// Steps that stood in with an earlier green result of the same inputs (reuse/), and the card-seconds that
  /// result took: what running them again would have cost.
  long long steps_reused = 0;
  double card_seconds_saved = 0;
  /// Perf steps (engine/engine_perf.cpp): samples taken, and verdicts by metric and change (slower, faster, none,
  /// "" for not judged).
  long long perf_samples = 0;
  std::map<std::pair<std::string, std::string>, long long> perf_verdicts;
  static constexpr std::size_t kMaxPerfMetricNames = 50;  // then "other"
  /// Steps with `tests:` that failed "ran no tests", by branch: "main" (runner.yml main-branch), "pull_request",
  /// "other" (each from 0, so an alert's increase() sees the first one).
  std::map<std::string, long long> ran_no_tests_by_branch = {{"main", 0}, {"pull_request", 0}, {"other", 0}};
};

}  // namespace pto
