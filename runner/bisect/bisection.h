#pragma once
// Bisection: which commit on the first-parent path from a good commit to a bad one broke a step (or one test),
// when the failure may be intermittent (SPEC "Find the commit"; DESIGN "Bisection with flakes"). Pure: it is
// told the path and each probe's outcome, and says which probes to run next; the daemon runs them
// (bisect/bisections), and bench/bench_bisect drives it with a simulated step.
//
//   1. red at bad:    `repeat: N`: N probes at bad, one failure makes it red. `repeat: auto`: probes at bad
//                     (kMeasureBatch at a time) until kMeasureFails failed or kMeasureMax ran measure the failure
//                     rate; p is its lower bound (Wilson, 80%: a rate measured high by luck would make too few
//                     repeats) and each later verdict takes r = ceil(ln 0.05 / ln(1 - p)) passes (a bad commit
//                     passes them all with chance under 5%; p = 0.5: 5, p = 0.2: 14). Simulated
//                     (bench/bench_bisect), this names the culprit among 40 commits 96% of the time at a true
//                     rate of 0.5 and 93% at 0.2, where the point estimate from 5 probes did 78% and 45%.
//   2. green at good: r probes, every one must pass (with a fixed N: at once with step 1).
//   3. search:        halve the path: a commit is bad at its first failed probe, good after r passes. What is
//                     left between the last good and the first bad commit is the culprit.
// A probe that failed by a card or the host (its run's cause card or infra, after its own retry elsewhere) or
// that never ran says nothing: it is run again, at most kMaxInconclusive times per commit. A step or test that
// does not exist at a commit ends the bisection with that said, never guessed.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pto {

struct BisectSpec {
  std::string good, bad;  // full shas
  std::string job, step;  // the step's name in the job; "" = the job's last step
  std::string test;       // one test id of the step ("" = the whole step)
  int repeat = 1;         // probes per verdict; 0 = auto (measured at bad)
  /// `bisect --metric`: the step's perf metric; each probe is then its commit's build compared with good's on one
  /// card (bisect/base_comparisons), failing when significantly slower. Its own repeat: always 1.
  std::string metric;
  nlohmann::json json() const;
  static BisectSpec from_json(const nlohmann::json& j);
};

enum class ProbeOutcome { Pass, Fail, Inconclusive, Missing };
std::string to_string(ProbeOutcome o);

enum class BisectState { Running, Found, Failed, Cancelled };
std::string to_string(BisectState s);

class Bisection {
 public:
  static constexpr int kMeasureFails = 4, kMeasureMax = 30, kMeasureBatch = 4;
  static constexpr int kMaxInconclusive = 3;
  static constexpr int kMaxRepeat = 30;

  /// `path`: the first-parent commits after `spec.good` up to `spec.bad` (included), oldest first.
  Bisection(std::string id, BisectSpec spec, std::vector<std::string> path);

  /// The probes to start now (their ids); each started one is then given its run with started().
  std::vector<int> wanted();
  /// Whether `probe` still waits to be started.
  bool is_wanted(int probe) const;
  /// The commit a probe runs.
  const std::string& sha_of(int probe) const { return probes_.at(static_cast<std::size_t>(probe)).sha; }
  void started(int probe, const std::string& run);
  /// A probe's run ended. Returns the runs of probes no longer needed (the verdict is in): cancel them.
  std::vector<std::string> finished(const std::string& run, ProbeOutcome outcome, const std::string& detail);
  /// A wanted probe whose run could not be made (its commit lacks the step: Missing; the host could not
  /// fetch it: Inconclusive): judged as finished() would, with no run to link. Returns the runs to cancel.
  std::vector<std::string> refused(int probe, ProbeOutcome outcome, const std::string& detail);
  /// Whether `run` is one of this bisection's probes still running.
  bool has_run(const std::string& run) const;
  /// Ends it (a person's cancel, or the host could not make a probe): the runs still going, to cancel.
  std::vector<std::string> stop(BisectState state, const std::string& why);
  /// After a restart: probes that were running are lost (their runs were interrupted) and are run again.
  void restarted();

  BisectState state() const { return state_; }
  bool done() const { return state_ != BisectState::Running; }
  const std::string& id() const { return id_; }
  const BisectSpec& spec() const { return spec_; }
  std::optional<std::string> culprit() const;
  const std::string& error() const { return error_; }
  int runs_used() const;  // probes whose run ran to an outcome (inconclusive ones included; refused ones had none)

  /// Everything, for the journal and the API (GET /api/v1/bisections/{id}).
  nlohmann::json json() const;
  static Bisection from_json(const nlohmann::json& j);
  /// Each commit's subject line, beside the commits (shown with them; no verdict reads them).
  void set_subjects(std::vector<std::string> subjects) { subjects_ = std::move(subjects); }

 private:
  struct Probe {
    std::string sha;
    int index = 0;  // in path_; -1: the good commit
    std::string phase;  // measure | verify-bad | verify-good | search
    std::string run;
    std::string result;  // "" while wanted or running; pass | fail | inconclusive | missing | unneeded
    std::string detail;
  };
  /// The commit of `index` (-1: good).
  const std::string& commit(int index) const { return index < 0 ? spec_.good : path_[static_cast<std::size_t>(index)]; }
  /// Asks for `count` probes of commit `index` in `phase`.
  void ask(int index, const std::string& phase, int count);
  /// What the probes of `index` in `phase` say: 1 bad, 0 good, -1 not yet.
  int verdict(int index, const std::string& phase) const;
  /// Moves on from whatever has a verdict now; returns runs no longer needed.
  std::vector<std::string> advance();
  std::vector<std::string> unneeded(int index, const std::string& phase);
  /// `probe` has its outcome: what follows from it (`probe` is not used after new probes are asked for).
  std::vector<std::string> judged(Probe& probe, ProbeOutcome outcome, const std::string& detail);
  void fail(const std::string& why);

  std::string id_;
  BisectSpec spec_;
  std::vector<std::string> path_;
  std::vector<std::string> subjects_;  // path_'s subject lines (empty: not known, e.g. kept by an older daemon)
  std::vector<Probe> probes_;
  BisectState state_ = BisectState::Running;
  std::string stage_ = "verify";  // verify | search | done
  int repeats_ = 1;               // r
  double failure_rate_ = -1;      // measured at bad (auto), else -1
  int lo_ = -1, hi_ = 0;          // last known good, first known bad (indices)
  std::string error_;
};

}  // namespace pto
