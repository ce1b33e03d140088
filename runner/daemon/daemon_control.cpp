// Control runs (SPEC "Find the commit"; docs/maintainers.md, "Control runs"): when a step of a pull request's
// run fails and its run asked for it (`submit --control`) or the step does (`retry: {control: true}`), the
// same step also runs on the merge base, the main commit the pull request was built on (the first parent of
// GitHub's test merge, or the merge base with runner.yml main-branch), trimmed to that step and only its failed
// tests (plan/probe_plan), below every pull request in the queue (kControlPriority). The pull request's run
// does not end until the control is in (RunEngine::hold_finish); then the step's verdict says "also fails on
// main at BASE: not this pull request" or "passes on main at BASE" (bisect/probe_verdict judges the control).
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "bisect/probe_verdict.h"
#include "daemon/daemon.h"

namespace pto {

namespace {

/// Below every ref's priority and every pull request (runner.yml priorities go from -1000 up; a bisection's
/// probes are below this).
constexpr int kControlPriority = -1000;

/// The name a step has in every commit's plan: a shard's is its split step's.
std::string step_name_of(const PlanStep& ps) {
  if (!ps.shard) return ps.name;
  const std::size_t paren = ps.name.rfind(" (shard ");
  return paren == std::string::npos ? ps.name : ps.name.substr(0, paren);
}

}  // namespace

void Daemon::maybe_control(const RunRecord& r, const Plan& p, int job, int step) {
  const StepRecord& s = r.jobs[job].steps[step];
  const PlanStep& ps = p.jobs[job].steps[step];
  if ((s.state != StepState::Failed && s.state != StepState::TimedOut) || s.cause == "card" || s.cause == "infra") return;
  HostedRun* run = find_run(r.id);
  if (!run) return;
  const nlohmann::json& req = run->request();
  if (req.contains("probe") || !(req.value("control", false) || ps.retry.control)) return;
  const std::string ref = req.value("ref", ""), sha = req.value("sha", "");
  if (ref == cfg_.main_ref) return;  // main is what a pull request is compared with
  const std::size_t j = static_cast<std::size_t>(job), st = static_cast<std::size_t>(step);
  if (!mirror_ || sha.empty()) {
    run->engine().set_control(j, st, {"-", "", "unknown", "no control on main: this daemon runs its --root, not commits"});
    return;
  }
  run->engine().hold_finish();  // its end waits for the control's verdict
  ControlOf c{r.id, j, st, p.jobs[job].name, step_name_of(ps), ps.tests.any() ? s.tests_summary.unresolved : std::vector<std::string>{}, ""};
  spdlog::info("run {}: {} failed: a control run on the merge base of {}", r.id, step_label(p.jobs[job], ps), sha.substr(0, 12));
  const bool test_merge = ref.size() > 6 && ref.compare(ref.size() - 6, 6, "/merge") == 0 && ref.rfind("refs/pull/", 0) == 0;
  boost::asio::post(*git_workers_, [this, c, sha, test_merge]() mutable {
    SourceResult got = mirror_->merge_base(sha, cfg_.main_ref, test_merge, c.base);
    boost::asio::post(io_, [this, c, got]() mutable {
      if (!got.ok()) return finish_control(c, {"-", "", "unknown", "no control on main: " + got.message});
      if (HostedRun* pr = find_run(c.run); !pr || pr->engine().record().cancelled)
        return finish_control(c, {c.base, "", "unknown", "no control on main: the run was cancelled"});
      RunSubmission s;
      s.jobs = {c.job_name};
      s.sha = c.base;
      s.ref = "refs/pto-runner/control/" + c.run;
      s.probe = RunSubmission::Probe{c.job_name, c.step_name, c.tests, kControlPriority, "control of " + c.run};
      submit_run(std::move(s), own_caller("control of " + c.run), [this, c](Answer a) {
        if (a.outcome != Outcome::Created)
          return finish_control(c, {c.base, "", "unknown", "no control on main at " + c.base.substr(0, 12) + ": " + a.body.value("error", "refused")});
        const std::string control = a.body.value("id", "");
        controls_[control] = c;
        // Its run was cancelled while the control was being made: not waited for.
        if (HostedRun* pr = find_run(c.run); !pr || pr->engine().record().cancelled) cancel_run(control, own_caller("control of " + c.run));
        spdlog::info("run {}: control run {} of {} on {}", c.run, control, c.step_name, c.base.substr(0, 12));
      });
    });
  });
}

bool Daemon::control_finished(HostedRun& control) {
  auto it = controls_.find(control.id());
  if (it == controls_.end()) return false;
  const ControlOf c = it->second;
  controls_.erase(it);
  const ProbeVerdict v = judge_probe(control.engine().record(), control.engine().plan(), c.job_name, "");
  const std::string at = c.base.substr(0, 12);
  StepRecord::Control out{c.base, control.id(), "unknown", ""};
  if (control.engine().record().cancelled) out.note = "the control on main at " + at + " was cancelled";
  else if (v.outcome == ProbeOutcome::Fail) out.result = "also-fails", out.note = "also fails on main at " + at + ": not this pull request";
  else if (v.outcome == ProbeOutcome::Pass) out.result = "passes", out.note = "passes on main at " + at;
  else out.note = "the control on main at " + at + " could not say (" + v.detail + ")";
  finish_control(c, std::move(out));
  return true;
}

void Daemon::finish_control(const ControlOf& c, StepRecord::Control control) {
  HostedRun* run = find_run(c.run);
  if (!run) return;
  spdlog::info("run {}: {}", c.run, control.note);
  run->engine().set_control(c.job, c.step, std::move(control));
  run->engine().release_finish();
  view_changed();
}

void Daemon::cancel_controls_of(const std::string& run) {
  std::vector<std::string> ids;
  for (const auto& [id, c] : controls_)
    if (c.run == run) ids.push_back(id);
  for (const std::string& id : ids) cancel_run(id, own_caller("control of " + run));
}

}  // namespace pto
