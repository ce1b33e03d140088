#pragma once
// HostQuestions: what a daemon asks of its own cards (SPEC "Find the commit"; docs/maintainers.md, "Bisection"
// and "Control runs"): bisections (bisect/bisections: kept in the journal's file, resumed after a restart) and a
// pull request's red step run again on main (bisect/control_runs), and a perf step measured against its merge
// base on one card (bisect/base_comparisons). All are answered by probe runs the host
// makes as any submission (bisect/probe_host); both hear of every run's end. One owner of the two, as
// notify/host_notices is of on-call's notifications. Engine thread only.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "bisect/base_comparisons.h"
#include "bisect/bisections.h"
#include "bisect/control_runs.h"
#include "bisect/probe_host.h"

namespace pto {

struct ReadModel;

class HostQuestions {
 public:
  /// `mirror`: the commits (null without runner.yml `source:`: bisections refused, no control runs); `main_ref`:
  /// runner.yml's main branch, read when asked (it outlives this; a reload changes it);
  /// `engine_of`: an active run's engine (a control's pull request's run); `model`: where bisections are shown;
  /// `changed`: refresh the view soon; `bisection_ended`: once per bisection (on-call hears it).
  HostQuestions(ProbeHost probes, GitMirror* mirror, const std::string& main_ref, std::function<RunEngine*(const std::string& run)> engine_of,
                ReadModel& model, std::function<void()> changed, std::function<void(const Bisection&)> bisection_ended);

  /// The bisections kept in `journal_file`; "" or why bisections are off. resume(): those that were running go on.
  std::string open(const std::string& journal_file) { return bisections_.open(journal_file); }
  void resume() { bisections_.resume(); }

  void start_bisection(BisectSpec spec, const std::string& by, Reply reply) { bisections_.start(std::move(spec), by, std::move(reply)); }
  Answer cancel_bisection(const std::string& id, const std::string& by) { return bisections_.cancel(id, by); }

  /// A step of a run (`request`: its journaled request) became final: a control run may be asked for it.
  void step_final(const RunRecord& r, const Plan& p, int job, int step, const nlohmann::json& request) {
    controls_.step_final(r, p, job, step, request);
  }
  /// A perf step compared with its merge base took a sample (bisect/base_comparisons).
  void perf_sample(const std::string& run, std::size_t job, std::size_t step, const std::string& ref, const std::string& sha, int priority,
                   const std::string& against) {
    comparisons_.sample(run, job, step, ref, sha, priority, against);
  }
  /// A run ended: a probe's verdict goes to its bisection, a control's to its pull request's step.
  void run_finished(const std::string& run, const RunRecord& record, const Plan& plan, const std::string& sha);
  /// A run was cancelled on request: its control runs go too (its end waits for them).
  void run_cancelled(const std::string& run) {
    controls_.cancel_of(run);
    comparisons_.cancel_of(run);
  }

 private:
  ControlRuns controls_;
  BaseComparisons comparisons_;
  Bisections bisections_;
};

}  // namespace pto
