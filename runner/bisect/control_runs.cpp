#include "bisect/control_runs.h"

#include <spdlog/spdlog.h>

#include "bisect/probe_verdict.h"
#include "source/git_mirror.h"
#include "util/ids.h"

namespace pto {

namespace {

/// The name a step has in every commit's plan: a shard's is its split step's.
std::string step_name_of(const PlanStep& ps) {
  if (!ps.shard) return ps.name;
  const std::size_t paren = ps.name.rfind(" (shard ");
  return paren == std::string::npos ? ps.name : ps.name.substr(0, paren);
}

}  // namespace

ControlRuns::ControlRuns(ProbeHost host, GitMirror* mirror, const std::string& main_ref,
                         std::function<RunEngine*(const std::string& run)> engine_of, std::function<void()> changed)
    : host_(std::move(host)), mirror_(mirror), main_ref_(main_ref), engine_of_(std::move(engine_of)), changed_(std::move(changed)) {}

void ControlRuns::step_final(const RunRecord& r, const Plan& p, int job, int step, const nlohmann::json& req) {
  const StepRecord& s = r.jobs[job].steps[step];
  const PlanStep& ps = p.jobs[job].steps[step];
  if ((s.state != StepState::Failed && s.state != StepState::TimedOut) || s.cause == "card" || s.cause == "infra") return;
  RunEngine* engine = engine_of_(r.id);
  if (!engine) return;
  if (req.contains("probe") || !(req.value("control", false) || ps.retry.control)) return;
  const std::string ref = req.value("ref", ""), sha = req.value("sha", "");
  if (ref == main_ref_) return;  // main is what a pull request is compared with
  const std::size_t j = static_cast<std::size_t>(job), st = static_cast<std::size_t>(step);
  if (!mirror_ || sha.empty()) {
    engine->set_control(j, st, {"-", "", "unknown", "no control on main: this daemon runs its --root, not commits"});
    return;
  }
  engine->hold_finish();  // its end waits for the control's verdict
  auto c = std::make_shared<Of>(Of{r.id, j, st, p.jobs[job].name, step_name_of(ps), ps.tests.any() ? s.tests_summary.unresolved : std::vector<std::string>{}, ""});
  spdlog::info("run {}: {} failed: a control run on the merge base of {}", r.id, step_label(p.jobs[job], ps), sha.substr(0, 12));
  const bool test_merge = ref.size() > 6 && ref.compare(ref.size() - 6, 6, "/merge") == 0 && ref.rfind("refs/pull/", 0) == 0;
  auto got = std::make_shared<SourceResult>();
  host_.git([this, c, got, sha, test_merge, main = main_ref_] { *got = mirror_->merge_base(sha, main, test_merge, c->base); },
            [this, c, got] {
              if (!got->ok()) return finish(*c, {"-", "", "unknown", "no control on main: " + got->message});
              if (RunEngine* pr = engine_of_(c->run); !pr || pr->record().cancelled)
                return finish(*c, {c->base, "", "unknown", "no control on main: the run was cancelled"});
              ProbeRun run{c->job_name, c->step_name, c->tests, c->base, "refs/pto-runner/control/" + c->run, kControlPriority,
                           "control of " + c->run};
              host_.submit(std::move(run), [this, c](ProbeAnswer a) {
                if (a.run.empty()) return finish(*c, {c->base, "", "unknown", "no control on main at " + c->base.substr(0, 12) + ": " + a.why});
                controls_[a.run] = *c;
                // Its run was cancelled while the control was being made: not waited for.
                if (RunEngine* pr = engine_of_(c->run); !pr || pr->record().cancelled) host_.cancel(a.run, "control of " + c->run);
                spdlog::info("run {}: control run {} of {} on {}", c->run, a.run, c->step_name, c->base.substr(0, 12));
              });
            });
}

bool ControlRuns::finished(const std::string& run, const RunRecord& record, const Plan& plan) {
  auto it = controls_.find(run);
  if (it == controls_.end()) return false;
  const Of c = it->second;
  controls_.erase(it);
  const ProbeVerdict v = judge_probe(record, plan, c.job_name, "");
  const std::string at = c.base.substr(0, 12);
  StepRecord::Control out{c.base, run, "unknown", ""};
  if (record.cancelled) out.note = "the control on main at " + at + " was cancelled";
  else if (v.outcome == ProbeOutcome::Fail) out.result = "also-fails", out.note = "also fails on main at " + at + ": not this pull request";
  else if (v.outcome == ProbeOutcome::Pass) out.result = "passes", out.note = "passes on main at " + at;
  else out.note = "the control on main at " + at + " could not say (" + v.detail + ")";
  finish(c, std::move(out));
  return true;
}

void ControlRuns::finish(const Of& c, StepRecord::Control control) {
  RunEngine* engine = engine_of_(c.run);
  if (!engine) return;
  spdlog::info("run {}: {}", c.run, control.note);
  engine->set_control(c.job, c.step, std::move(control));
  engine->release_finish();
  changed_();
}

void ControlRuns::cancel_of(const std::string& run) {
  std::vector<std::string> ids;
  for (const auto& [id, c] : controls_)
    if (c.run == run) ids.push_back(id);
  for (const std::string& id : ids) host_.cancel(id, "control of " + run);
}

}  // namespace pto
