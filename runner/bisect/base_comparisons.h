#pragma once
// BaseComparisons: "is this pull request slower than main?" measured on one card (SPEC "Performance, judged
// like an experiment"; docs/maintainers.md, "Performance"). A perf step with `compare: base` in a pull
// request's run takes its first sample; then its merge base (found as a control run's is) is made as a probe
// run of that step, whose samples are pinned to the same card, and the two builds take turns on it: PR, base,
// PR, base... (each engine waits between its samples: EngineOptions::Perf::paired). Each pair goes to a
// sequential paired comparison (perf/paired_comparison), which stops when its interval is clear of zero or
// inside the threshold, or at `samples` pairs; the pull request's step then ends with the verdict ("slower by
// 9.8% (95% CI 6.1 to 13.4%) on card 3, 12 pairs"), red only with `gate: true` and a significant slowdown past
// the threshold. Engine thread only. A restart of the daemon starts a comparison anew.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bisect/probe_host.h"
#include "engine/engine.h"
#include "perf/paired_comparison.h"

namespace pto {

class GitMirror;

class BaseComparisons {
 public:
  BaseComparisons(ProbeHost host, GitMirror* mirror, const std::string& main_ref, std::function<RunEngine*(const std::string& run)> engine_of,
                  std::function<void()> changed);

  /// A perf step of `run` took a sample and waits for its pair. `ref`, `sha`, `priority`: the run's (a pull
  /// request's run asks for its merge base at its own priority); `against`: the commit to compare with instead
  /// of the merge base (a perf bisection's good commit: then a significant slowdown is always red).
  void sample(const std::string& run, std::size_t job, std::size_t step, const std::string& ref, const std::string& sha, int priority,
              const std::string& against = "");
  /// A run ended: a base's run that ended before its comparison did leaves the pull request's step without one
  /// (said in its verdict), and a pull request's run that ended takes its base's run with it. True when it
  /// was a base's run.
  bool finished(const std::string& run);
  /// The pull request's run was cancelled: its bases' runs go too.
  void cancel_of(const std::string& run);

 private:
  struct Comparison {
    std::string run;  // the pull request's
    std::size_t job = 0, step = 0;
    std::string job_name, step_name;
    std::string base, base_run;  // the merge base's commit and its probe run ("" while it is being made)
    std::size_t base_job = 0, base_step = 0;
    bool base_measured = false;  // the base's step has taken a sample (it waits for its next turn)
    std::vector<double> pr, base_samples;
    std::vector<int> cards;
    PerfSpec spec;
    bool gate = false;       // red when significantly slower past the threshold
    std::string base_words;  // how the verdict names what it was compared with: "the merge base ", or ""
    std::unique_ptr<PairedComparison> cmp;
  };
  void start(const std::shared_ptr<Comparison>& c, const std::string& ref, const std::string& sha, int priority, const std::string& against);
  /// Makes the other build's probe run, pinned to the comparison's cards.
  void submit_base(const std::shared_ptr<Comparison>& c, int priority);
  void pair(const std::shared_ptr<Comparison>& c);
  /// Ends the pull request's step (and the base's, which has nothing more to do).
  void settle(const std::shared_ptr<Comparison>& c, const std::string& verdict, const std::string& change, bool red);
  static std::string key(const std::string& run, std::size_t job, std::size_t step);

  ProbeHost host_;
  GitMirror* mirror_;
  const std::string& main_ref_;
  std::function<RunEngine*(const std::string&)> engine_of_;
  std::function<void()> changed_;
  std::map<std::string, std::shared_ptr<Comparison>> by_step_;      // "run/job/step" of the pull request's step
  std::map<std::string, std::shared_ptr<Comparison>> by_base_run_;  // the base's probe run
};

}  // namespace pto
