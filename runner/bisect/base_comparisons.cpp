#include "bisect/base_comparisons.h"

#include <spdlog/spdlog.h>

#include "config/device_spec.h"
#include "source/git_mirror.h"

namespace pto {

BaseComparisons::BaseComparisons(ProbeHost host, GitMirror* mirror, const std::string& main_ref,
                                 std::function<RunEngine*(const std::string& run)> engine_of, std::function<void()> changed)
    : host_(std::move(host)), mirror_(mirror), main_ref_(main_ref), engine_of_(std::move(engine_of)), changed_(std::move(changed)) {}

std::string BaseComparisons::key(const std::string& run, std::size_t job, std::size_t step) {
  return run + "/" + std::to_string(job) + "/" + std::to_string(step);
}

void BaseComparisons::sample(const std::string& run, std::size_t job, std::size_t step, const std::string& ref, const std::string& sha,
                             int priority, const std::string& against) {
  RunEngine* engine = engine_of_(run);
  if (!engine) return;
  const StepRecord& sr = engine->record().jobs[job].steps[step];
  if (!sr.perf || sr.perf->samples.empty()) return;
  const double value = sr.perf->samples.back();
  if (auto b = by_base_run_.find(run); b != by_base_run_.end()) {  // the merge base's sample: a pair is complete
    std::shared_ptr<Comparison> c = b->second;
    c->base_job = job, c->base_step = step, c->base_measured = true;
    c->base_samples.push_back(value);
    pair(c);
    return;
  }
  auto it = by_step_.find(key(run, job, step));
  if (it != by_step_.end()) {  // the pull request's next sample: the base's turn
    std::shared_ptr<Comparison> c = it->second;
    c->pr.push_back(value);
    if (RunEngine* base = c->base_measured ? engine_of_(c->base_run) : nullptr) base->perf_next(c->base_job, c->base_step);
    return;
  }
  auto c = std::make_shared<Comparison>();
  const PlanJob& pj = engine->plan().jobs[job];
  c->run = run, c->job = job, c->step = step, c->job_name = pj.name, c->step_name = pj.steps[step].name;
  c->spec = *pj.steps[step].perf;
  c->gate = c->spec.gate || !against.empty();
  c->base_words = against.empty() ? "the merge base " : "";
  c->cards = sr.perf->cards;
  c->pr.push_back(value);
  PairedComparison::Options o;
  o.threshold = c->spec.threshold_pct / 100;
  o.max_pairs = std::max(o.min_pairs, c->spec.sample_count());
  c->cmp = std::make_unique<PairedComparison>(o);
  by_step_[key(run, job, step)] = c;
  start(c, ref, sha, priority, against);
}

void BaseComparisons::start(const std::shared_ptr<Comparison>& c, const std::string& ref, const std::string& sha, int priority,
                            const std::string& against) {
  if (!against.empty()) {  // a perf bisection's probe: its good commit is what it is compared with
    c->base = against;
    return submit_base(c, priority);
  }
  if (!mirror_ || sha.empty() || ref == main_ref_)
    return settle(c, "not compared: no merge base to measure here (" + std::string(!mirror_ || sha.empty() ? "this daemon runs its --root, not commits" : "a run of main") + ")", "", false);
  const bool test_merge = ref.size() > 6 && ref.compare(ref.size() - 6, 6, "/merge") == 0 && ref.rfind("refs/pull/", 0) == 0;
  auto got = std::make_shared<SourceResult>();
  host_.git([this, c, got, sha, test_merge, main = main_ref_] { *got = mirror_->merge_base(sha, main, test_merge, c->base); },
            [this, c, got, priority] {
              if (!got->ok()) return settle(c, "not compared: no merge base (" + got->message + ")", "", false);
              submit_base(c, priority);
            });
}

void BaseComparisons::submit_base(const std::shared_ptr<Comparison>& c, int priority) {
  if (RunEngine* pr = engine_of_(c->run); !pr || pr->record().cancelled) return settle(c, "not compared: the run was cancelled", "", false);
  ProbeRun run{c->job_name, c->step_name, {}, c->base, "refs/pto-runner/perf-base/" + c->run, priority, "perf base of " + c->run, true, c->cards, ""};
  host_.submit(std::move(run), [this, c](ProbeAnswer a) {
    if (a.run.empty()) return settle(c, "not compared: " + c->base.substr(0, 12) + " could not be measured: " + a.why, "", false);
    c->base_run = a.run;
    by_base_run_[a.run] = c;
    spdlog::info("run {}: {} is compared with {} (run {}) on card {}", c->run, c->step_name, c->base.substr(0, 12), a.run, join_ids(c->cards));
    if (RunEngine* pr = engine_of_(c->run); !pr || pr->record().cancelled) host_.cancel(a.run, "perf base of " + c->run);
  });
}

void BaseComparisons::pair(const std::shared_ptr<Comparison>& c) {
  const std::size_t k = c->base_samples.size();
  if (k > c->pr.size()) return;  // not expected: the pull request's build always measures first
  // Worse is "slower" to the comparison: a higher-is-better number is compared by its inverse.
  auto worse_up = [&](double v) { return c->spec.lower_is_better ? v : 1 / v; };
  c->cmp->add(worse_up(c->base_samples[k - 1]), worse_up(c->pr[k - 1]));
  std::optional<PerfVerdict> v = c->cmp->look();
  if (!v) {
    if (RunEngine* pr = engine_of_(c->run)) pr->perf_next(c->job, c->step);
    return;
  }
  std::string text = v->text(join_ids(c->cards));
  if (!c->spec.lower_is_better) {  // said in the metric's own words
    if (v->kind == PerfVerdict::Kind::Slower) text.replace(0, 6, "worse");
    if (v->kind == PerfVerdict::Kind::Faster) text.replace(0, 6, "better");
  }
  text += " against " + c->base_words + c->base.substr(0, 12);
  const std::string change = v->kind == PerfVerdict::Kind::Slower   ? "slower"
                             : v->kind == PerfVerdict::Kind::Faster ? "faster"
                                                                    : "none";
  settle(c, text, change, c->gate && v->kind == PerfVerdict::Kind::Slower && v->beyond_threshold);
}

void BaseComparisons::settle(const std::shared_ptr<Comparison>& c, const std::string& verdict, const std::string& change, bool red) {
  by_step_.erase(key(c->run, c->job, c->step));
  if (!c->base_run.empty()) by_base_run_.erase(c->base_run);
  if (RunEngine* pr = engine_of_(c->run)) pr->perf_settle(c->job, c->step, verdict, change, c->base_samples, red);
  if (RunEngine* base = c->base_measured ? engine_of_(c->base_run) : nullptr)
    base->perf_settle(c->base_job, c->base_step, "the merge base's side of " + c->run + "'s comparison", "", c->pr, false);
  spdlog::info("run {}: {}: {}", c->run, c->step_name, verdict);
  changed_();
}

bool BaseComparisons::finished(const std::string& run) {
  if (auto b = by_base_run_.find(run); b != by_base_run_.end()) {
    std::shared_ptr<Comparison> c = b->second;
    c->base_measured = false;  // its engine has ended: nothing of it to settle
    settle(c, "not compared: the merge base's run " + run + " ended before its samples were in", "", false);
    return true;
  }
  std::vector<std::shared_ptr<Comparison>> of;
  for (const auto& [k, c] : by_step_)
    if (c->run == run) of.push_back(c);
  for (const auto& c : of) {
    by_step_.erase(key(c->run, c->job, c->step));
    if (!c->base_run.empty()) {
      by_base_run_.erase(c->base_run);
      host_.cancel(c->base_run, "perf base of " + run);
    }
  }
  return false;
}

void BaseComparisons::cancel_of(const std::string& run) {
  for (const auto& [k, c] : by_step_)
    if (c->run == run && !c->base_run.empty()) host_.cancel(c->base_run, "perf base of " + run);
}

}  // namespace pto
