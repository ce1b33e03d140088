// RunEngine's part in reuse (SPEC "Nothing run twice"): a step whose result key has a green result stands in
// with it (`reused`) instead of running; a step that ends green with nothing doubtful in it is kept for later
// runs; and at a run's start, a job every step of which is already green waits for nothing, so that the build
// and the lead job it needs are not run for it. The results are kept by store/step_results, behind
// EngineOptions::reuse; the keys are reuse/result_key's.
#include <algorithm>

#include "engine/engine.h"
#include "util/api_paths.h"
#include "util/clock.h"
#include "util/ids.h"

namespace pto {

std::string RunEngine::reuse_key(std::size_t j, std::size_t s) const {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  if (!opts_.reuse || !ps.reuse || ps.kind != StepKind::Command || opts_.simulate || run_.jobs[j].steps[s].attempt > 0) return "";
  auto tree = input_trees_.find(globs_text(ps.reuse_inputs));
  if (tree == input_trees_.end() || tree->second.empty()) return "";
  ResultKeyParts k;
  k.step_key = ps.key;
  k.inputs_tree = tree->second;
  k.job_env = plan_.jobs[j].env;
  for (std::size_t n = 0; n < plan_.jobs.size(); ++n)
    if (std::count(plan_.jobs[j].needs.begin(), plan_.jobs[j].needs.end(), plan_.jobs[n].name)) k.needs_outputs[plan_.jobs[n].id] = run_.jobs[n].outputs;
  k.toolchain = plan_.ptoas_version + " " + plan_.arch;
  k.host_env = opts_.base_env;
  k.card_type = ps.device_type;
  return result_key(k);
}

bool RunEngine::reuse_step(std::size_t j, std::size_t s) {
  StepRecord& sr = run_.jobs[j].steps[s];
  std::optional<ReusableResult> found;
  if (auto it = foreseen_.find({j, s}); it != foreseen_.end()) {  // found at the start: the job did not wait for its needs
    found = std::move(it->second);
    foreseen_.erase(it);
    sr.result_key = found->key;
  } else {
    sr.result_key = reuse_key(j, s);
    if (sr.result_key.empty()) return false;
    found = opts_.reuse->find(sr.result_key);
  }
  if (!found) return false;
  sr.reused_from = StepRecord::ReusedFrom{found->run, found->step, found->label, found->log, found->card_seconds};
  sr.outputs = found->outputs;
  sr.tests = std::move(found->tests);  // its cases as they were, in this run's tests and junit.xml
  if (!sr.tests.empty()) sr.tests_summary = summarize_tests(sr.tests);
  sr.verdict = "reused from run " + found->run + ", step " + found->label;
  transition(j, s, StepState::Reused);
  return true;
}

void RunEngine::foresee_reuse() {
  foreseen_jobs_.assign(plan_.jobs.size(), false);
  if (!opts_.reuse || opts_.simulate) return;
  for (const JobRecord& jr : run_.jobs)
    if (jr.state != JobState::Pending) return;  // only a fresh run: a taken-over one goes on as it was
  auto has_outputs = [&](const std::string& name) {
    return std::any_of(plan_.jobs.begin(), plan_.jobs.end(), [&](const PlanJob& n) { return n.name == name && !n.outputs.empty(); });
  };
  for (std::size_t j = 0; j < plan_.jobs.size(); ++j) {
    const PlanJob& pj = plan_.jobs[j];
    // Its key must not wait for what its needs will say, and nothing but its own steps may decide it.
    if (pj.lead || !pj.if_expr.empty() || pj.steps.empty() || held(j) ||
        std::any_of(pj.needs.begin(), pj.needs.end(), has_outputs))
      continue;
    std::map<std::pair<std::size_t, std::size_t>, ReusableResult> found;
    std::size_t settled = 0;  // steps found, and repeats of them (deduplicated: they do what the step they repeat does)
    for (std::size_t s = 0; s < pj.steps.size(); ++s, ++settled) {
      const PlanStep& ps = pj.steps[s];
      if (ps.deduplicated_from) continue;
      if (!ps.if_expr.empty() || ps.shard) break;
      const std::string key = reuse_key(j, s);
      std::optional<ReusableResult> r = key.empty() ? std::nullopt : opts_.reuse->find(key);
      if (!r) break;
      r->key = key;
      found.emplace(std::make_pair(j, s), std::move(*r));
    }
    if (settled != pj.steps.size()) continue;
    foreseen_jobs_[j] = true;
    foreseen_.merge(found);
  }
  // From the last job back (the plan is in dependency order): a job that only makes things for others is not
  // needed when every job that needs it is foreseen reused or is itself not needed.
  std::vector<bool> unneeded(plan_.jobs.size(), false);
  for (std::size_t n = plan_.jobs.size(); n-- > 0;) {
    const PlanJob& pn = plan_.jobs[n];
    const bool makes_for_others = pn.lead || std::none_of(pn.steps.begin(), pn.steps.end(), [](const PlanStep& s) { return s.reuse; });
    if (!makes_for_others || foreseen_jobs_[n]) continue;
    bool any = false, all = true;
    for (std::size_t d = n + 1; d < plan_.jobs.size(); ++d)
      if (std::count(plan_.jobs[d].needs.begin(), plan_.jobs[d].needs.end(), pn.name)) {
        any = true;
        all = all && (foreseen_jobs_[d] || unneeded[d]);
      }
    unneeded[n] = any && all;
  }
  for (std::size_t n = 0; n < plan_.jobs.size(); ++n)
    if (unneeded[n]) skip_job(n, JobState::Skipped, "not needed: every job that needs it reused its results");
}

void RunEngine::record_result(std::size_t j, std::size_t s) {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  const StepRecord& sr = run_.jobs[j].steps[s];
  if (!opts_.reuse || sr.result_key.empty() || sr.state != StepState::Succeeded || sr.wrote_env || !sr.failures.empty() || !sr.lease_failures.empty() ||
      !sr.cause.empty() || sr.tests_summary.flaky > 0 || sr.tests_summary.muted > 0 || sr.tests_summary.recovered > 0)
    return;
  ReusableResult r;
  r.key = sr.result_key;
  r.run = run_.id;
  r.step = StepId{j, s}.text();
  r.label = label(j, s);
  r.log = api_path::step_log(run_.id, r.step);
  r.finished = epoch_now();
  r.card_seconds = sr.started_at >= 0 && sr.finished_at >= sr.started_at ? (sr.finished_at - sr.started_at) * ps.devices : 0;
  r.outputs = sr.outputs;
  r.tests = sr.tests;
  opts_.reuse->record(r);
}

}  // namespace pto
