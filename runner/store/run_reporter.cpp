#include "store/run_reporter.h"

#include <algorithm>
#include <set>

#include "engine/run_state_json.h"
#include "report/run_view.h"
#include "store/run_history.h"
#include "util/ids.h"

namespace pto {

RunReporter::RunReporter(RunHistory& history, Metrics& metrics, const std::string& main_ref, bool learn_durations,
                         std::function<const nlohmann::json*(const std::string&)> request_of, std::function<void()> changed)
    : history_(history),
      metrics_(metrics),
      main_ref_(main_ref),
      learn_durations_(learn_durations),
      request_of_(std::move(request_of)),
      changed_(std::move(changed)) {
  history_.set_before_commit([this] { write_due_heads(); });
}

RunReporter::~RunReporter() { history_.set_before_commit(nullptr); }

void RunReporter::step_changed(const RunRecord& r, const Plan& p, int job, int step) {
  if (!keep_engine_state_) return history_.step_changed(r.id, job, step, step_to_json(r, p, job, step, 0));
  // The event and the engine's state of the step in one transaction (one commit a transition, not two).
  const nlohmann::json state = step_state_json(r.jobs[job].steps[step]);
  if (history_.grouping()) {
    // The run's head as the group's commit finds it, once (a run's start queues its 1,000 steps in one group).
    heads_due_[r.id] = &r;
    return history_.step_changed(r.id, job, step, step_to_json(r, p, job, step, 0), nullptr, &state);
  }
  const nlohmann::json head = run_head_json(r, false);
  history_.step_changed(r.id, job, step, step_to_json(r, p, job, step, 0), &head, &state);
}

void RunReporter::write_due_heads() {
  for (const auto& [id, record] : heads_due_) history_.engine_state_changed(id, run_head_json(*record, false), -1, -1, nullptr);
  heads_due_.clear();
}

void RunReporter::run_gone(const RunRecord& r) {
  auto due = heads_due_.find(r.id);
  if (due == heads_due_.end()) return;
  heads_due_.erase(due);
  // A finished run's engine state is dropped with its end (RunHistory::run_finished): not written again.
  if (r.finished.empty()) history_.engine_state_changed(r.id, run_head_json(r, false), -1, -1, nullptr);
}

void RunReporter::step_updated(const RunRecord& r, int job, int step) {
  if (keep_engine_state_) history_.engine_state_changed(r.id, run_head_json(r, false), job, step, step_state_json(r.jobs[job].steps[step]));
}

void RunReporter::durable() { history_.durable(); }

void RunReporter::run_changed(const RunRecord& r) {
  if (keep_engine_state_) history_.engine_state_changed(r.id, run_head_json(r, false), -1, -1, nullptr);
}

void RunReporter::job_finished(const RunRecord& r, const Plan& p, int job) {
  if (keep_engine_state_) history_.engine_state_changed(r.id, run_head_json(r, false), job, -1, nullptr);
  // The run's last job: the run's end follows at once and writes its record whole (RunHistory::run_finished),
  // so it is not built and written twice (a megabyte for a run of 1,000 steps, on the engine's thread).
  if (std::all_of(r.jobs.begin(), r.jobs.end(), [](const JobRecord& j) { return is_final(j.state); }))
    return history_.job_finished(r.id, job, job_to_json(r, p, job, 0, false), nullptr);
  nlohmann::json record = run_to_json(r, p, "running", -1, 0);
  if (const nlohmann::json* request = request_of_(r.id)) record["request"] = *request;
  history_.job_finished(r.id, job, job_to_json(r, p, job, 0, false), &record);
}

void RunReporter::on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState from) {
  changed_();  // any transition: the read model is refreshed soon
  const StepRecord& s = r.jobs[job].steps[step];
  if (from == StepState::Running && s.state != StepState::Running) card_events_of_attempt(r, p, job, step);
  if (s.state == StepState::Running) {
    if (s.runnable_at >= 0 && s.started_at >= 0) metrics_.wait_seconds.observe(s.started_at - s.runnable_at);
    return;
  }
  if (!is_final(s.state)) return;
  metrics_.steps_by_result[to_string(s.state)]++;
  if (s.state == StepState::Reused && s.reused_from) {
    ++metrics_.steps_reused;
    metrics_.card_seconds_saved += s.reused_from->card_seconds;
  }
  if (s.perf && !s.perf->verdict.empty() && p.jobs[job].steps[step].perf) {
    metrics_.perf_samples += static_cast<long long>(s.perf->samples.size());
    // A metric's name is the definitions', which a pull request writes: past 50 names, new ones count as "other",
    // so no run can grow the metrics without bound.
    std::string metric = p.jobs[job].steps[step].perf->name;
    std::set<std::string> names;
    for (const auto& [k, n] : metrics_.perf_verdicts) names.insert(k.first);
    if (!names.count(metric) && names.size() >= Metrics::kMaxPerfMetricNames) metric = "other";
    metrics_.perf_verdicts[{metric, s.perf->change}]++;
  }
  for (const auto& [name, c] : s.caches) {
    metrics_.cache_hits[name] += c.hits;
    metrics_.cache_misses[name] += c.misses;
  }
  // What a successful run of this step took, to estimate its next run (simulated sleeps say nothing).
  if (s.state == StepState::Succeeded && learn_durations_ && p.jobs[job].steps[step].kind == StepKind::Command && s.started_at >= 0 &&
      s.finished_at >= s.started_at)
    history_.record_duration(p.jobs[job].steps[step].key, s.finished_at - s.started_at, s.finished);
  if (s.started_at >= 0 && s.finished_at >= 0) metrics_.step_seconds.observe(to_string(s.state), s.finished_at - s.started_at);
  if (p.jobs[job].lead) lead_job_ended(r, s);
  // A reused step's cases ran in the run it came from: the test history has them from there.
  if (p.jobs[job].steps[step].tests.any() && !s.tests.empty() && s.state != StepState::Reused) tests_ended(r, p, job, step);
  if (p.jobs[job].steps[step].tests.any() && (s.state == StepState::Failed || s.state == StepState::TimedOut) &&
      s.error.rfind("ran no tests", 0) == 0)
    ran_no_tests(r);
  if (step_final_) step_final_(r, p, job, step);
}

void RunReporter::ran_no_tests(const RunRecord& r) {
  // Counted by branch (a probe's or a control's is its own story, not main's): main's going to zero tests pages.
  const nlohmann::json* request = request_of_(r.id);
  if (request && request->contains("probe")) return;
  const std::string ref = request ? request->value("ref", "") : "";
  metrics_.ran_no_tests_by_branch[ref == main_ref_ ? "main" : ref.rfind("refs/pull/", 0) == 0 ? "pull_request" : "other"]++;
}

void RunReporter::tests_ended(const RunRecord& r, const Plan& p, int job, int step) {
  const StepRecord& s = r.jobs[job].steps[step];
  const nlohmann::json* request = request_of_(r.id);
  StepTests st;
  st.run = r.id;
  st.ref = request ? request->value("ref", "") : "";
  st.sha = request ? request->value("sha", "") : "";
  st.step = step_label(p.jobs[job], p.jobs[job].steps[step]);
  st.at = epoch_now();
  st.cases = s.tests;
  for (TestCase& c : st.cases) c.output.clear();  // the history keeps the message only: the copy need not carry it
  history_.record_tests(std::move(st));
  std::map<std::string, TestResult> last;  // each test's last attempt
  std::map<std::string, int> attempt;
  for (const TestCase& c : s.tests)
    if (!attempt.count(c.id) || attempt[c.id] <= c.attempt) attempt[c.id] = c.attempt, last[c.id] = c.result;
  for (const auto& [id, result] : last) metrics_.tests_by_result[to_string(result)]++;
}

void RunReporter::on_job_finished(const RunRecord&, const Plan&, int) { changed_(); }

void RunReporter::on_attempt_failed(const RunRecord&, const Plan&, int, int, const StepRecord::Failure& f, bool retried) {
  metrics_.failures_by_cause[to_string(f.evidence.cause)]++;
  if (retried) metrics_.retries_by_cause[to_string(f.evidence.cause)]++;
}

void RunReporter::on_health_check(const RunRecord& r, int card, const std::string& command, double seconds, const std::string& failure) {
  const double end = epoch_now();
  history_.card_event({card, "health-check", end - seconds, end, command, r.id, "", failure.empty() ? "passed" : "failed", failure});
}

void RunReporter::card_events_of_attempt(const RunRecord& r, const Plan& p, int job, int step) {
  const StepRecord& s = r.jobs[job].steps[step];
  if (s.cards.empty()) return;
  const double end = epoch_now();
  const double ran = s.started_at >= 0 && s.finished_at >= s.started_at ? s.finished_at - s.started_at : 0;
  std::string detail = s.error;
  if (detail.empty() && s.timed_out) detail = "timed out";
  if (detail.empty() && s.signal) detail = "signal " + std::to_string(s.signal);
  if (detail.empty() && s.exit_code >= 0) detail = "exit " + std::to_string(s.exit_code);
  // The cause it was charged to, when it failed (engine/failure_evidence).
  if (!s.failures.empty() && s.failures.back().attempt == s.attempt)
    detail = to_string(s.failures.back().evidence.cause) + ": " + s.failures.back().evidence.reason;
  // An attempt retried goes back to waiting: it failed all the same.
  const std::string result = s.state == StepState::Waiting || s.state == StepState::Pending ? "failed (retried)" : to_string(s.state);
  const StepId id{static_cast<std::size_t>(job), static_cast<std::size_t>(step)};
  for (int card : s.cards)
    history_.card_event({card, "step", end - ran, end, step_label(p.jobs[job], p.jobs[job].steps[step]), r.id, id.text(), result, detail});
}

void RunReporter::lead_job_ended(const RunRecord& r, const StepRecord& s) {
  ToolchainStatus& t = toolchain_;
  t.run = r.id;
  t.last_verified = s.finished;
  if (s.state == StepState::Succeeded) {
    t.state = "ready";
    auto get = [&](const char* k) {
      auto it = r.toolchain_env.find(k);
      return it == r.toolchain_env.end() ? std::string() : it->second;
    };
    t.version = get("PTOAS_VERSION");
    t.sha256 = get("PTOAS_SHA256");
    t.root = get("PTOAS_ROOT");
    t.bin = get("PTOAS_BIN");
    t.error.clear();
  } else {
    t.state = "failed";
    t.error = "lead job " + to_string(s.state) + "; see " + s.log_path;
  }
}

}  // namespace pto
