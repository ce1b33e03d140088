#pragma once
// ControlRuns: "does it fail on main too?" asked on the cards (SPEC "Find the commit"; docs/maintainers.md,
// "Control runs"). When a step of a pull request's run fails and its run asked for it (`submit --control`) or
// the step does (`retry: {control: true}`), the same step also runs on the merge base, the main commit the
// pull request was built on (the first parent of GitHub's test merge, or the merge base with runner.yml
// main-branch), trimmed to that step and only its failed tests, below every pull request in the queue
// (kControlPriority), made by the host (bisect/probe_host). The pull request's run does not end until the
// control is in (RunEngine::hold_finish); then the step's verdict says "also fails on main at BASE: not this
// pull request" or "passes on main at BASE" (bisect/probe_verdict judges the control). Engine thread only.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/probe_host.h"
#include "engine/engine.h"

namespace pto {

class GitMirror;

/// Below every ref's priority and every pull request (runner.yml priorities go from -1000 up; a bisection's
/// probes are below this).
constexpr int kControlPriority = -1000;

class ControlRuns {
 public:
  /// `mirror`: the commits' (null: no control, said in the step's verdict); `main_ref`: runner.yml
  /// main-branch's ref, read when asked (a reload changes it); `engine_of`: a run's engine while it is hosted
  /// (null when it is gone); `changed`: the read model has something new.
  ControlRuns(ProbeHost host, GitMirror* mirror, const std::string& main_ref, std::function<RunEngine*(const std::string& run)> engine_of,
              std::function<void()> changed);

  /// A step of run `r` (made from `request`) reached its final state: when it failed by its code and a
  /// control is asked for, the control starts and holds the run's end.
  void step_final(const RunRecord& r, const Plan& p, int job, int step, const nlohmann::json& request);
  /// A finished run that was a control: its verdict goes to the pull request's step (true); else false.
  bool finished(const std::string& run, const RunRecord& record, const Plan& plan);
  /// The pull request's run was cancelled: its controls are cancelled too (its end waits for them).
  void cancel_of(const std::string& run);

 private:
  struct Of {
    std::string run;  // the pull request's run
    std::size_t job = 0, step = 0;
    std::string job_name, step_name;
    std::vector<std::string> tests;  // its failed tests (with tests:), only those run on main
    std::string base;
  };
  void finish(const Of& c, StepRecord::Control control);

  ProbeHost host_;
  GitMirror* mirror_;
  const std::string& main_ref_;
  std::function<RunEngine*(const std::string&)> engine_of_;
  std::function<void()> changed_;
  std::map<std::string, Of> controls_;  // a control run -> what it controls
};

}  // namespace pto
