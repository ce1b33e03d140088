#include "bisect/probe_verdict.h"

namespace pto {

namespace {

/// One leg's probed steps: its last step, and for a split step its collection and every shard.
std::vector<std::size_t> probed_steps(const PlanJob& j) {
  std::vector<std::size_t> out;
  if (j.steps.empty()) return out;
  const PlanStep& last = j.steps.back();
  if (!last.shard) return {j.steps.size() - 1};
  for (std::size_t s = 0; s < j.steps.size(); ++s)
    if (static_cast<int>(s) == last.collect_step || j.steps[s].collect_step == last.collect_step) out.push_back(s);
  return out;
}

ProbeVerdict of_step(const StepRecord& s, const std::string& name) {
  switch (s.state) {
    case StepState::Succeeded: return {ProbeOutcome::Pass, name + " passed"};
    case StepState::Failed:
    case StepState::TimedOut: {
      const std::string said = !s.verdict.empty() ? s.verdict : !s.error.empty() ? s.error : "exit " + std::to_string(s.exit_code);
      if (s.cause == "card" || s.cause == "infra") return {ProbeOutcome::Inconclusive, name + ": " + said};
      return {ProbeOutcome::Fail, name + (s.state == StepState::TimedOut ? " timed out: " : " failed: ") + said};
    }
    default: return {ProbeOutcome::Inconclusive, name + " did not run (" + to_string(s.state) + (s.verdict.empty() ? "" : ": " + s.verdict) + ")"};
  }
}

ProbeVerdict of_test(const StepRecord& s, const std::string& test, const std::string& name) {
  const TestCase* last = nullptr;
  for (const TestCase& c : s.tests)
    if (c.id == test && (!last || c.attempt >= last->attempt)) last = &c;
  if (!last) {
    if (s.state != StepState::Succeeded && s.state != StepState::Failed && s.state != StepState::TimedOut)
      return {ProbeOutcome::Inconclusive, name + " did not run (" + to_string(s.state) + ")"};
    if (s.state == StepState::TimedOut) return {ProbeOutcome::Fail, name + " timed out before " + test + " ended"};
    return {ProbeOutcome::Missing, test + " is not among the tests " + name + " ran"};
  }
  const std::string message = last->message.substr(0, last->message.find('\n'));
  switch (last->result) {
    case TestResult::Passed:
    case TestResult::Skipped: return {ProbeOutcome::Pass, test + " " + to_string(last->result)};
    case TestResult::Victim: return {ProbeOutcome::Inconclusive, test + " failed behind " + last->victim_of + " on its card"};
    default:
      if (last->cause == FailureCause::Card || last->cause == FailureCause::Infra)
        return {ProbeOutcome::Inconclusive, test + " failed by its card: " + message};
      return {ProbeOutcome::Fail, test + " " + to_string(last->result) + (message.empty() ? "" : ": " + message)};
  }
}

}  // namespace

ProbeVerdict judge_probe(const RunRecord& r, const Plan& p, const std::string& job, const std::string& test) {
  ProbeVerdict out{ProbeOutcome::Pass, ""};
  bool any = false, test_seen = false;
  auto rank = [](ProbeOutcome o) { return o == ProbeOutcome::Fail ? 3 : o == ProbeOutcome::Missing ? 2 : o == ProbeOutcome::Inconclusive ? 1 : 0; };
  for (std::size_t j = 0; j < p.jobs.size(); ++j) {
    if (p.jobs[j].name != job) continue;
    for (std::size_t s : probed_steps(p.jobs[j])) {
      any = true;
      const PlanStep& ps = p.jobs[j].steps[s];
      const std::string name = step_label(p.jobs[j], ps);
      const StepRecord& rec = r.jobs[j].steps[s];
      // A shard skipped because none of the (probed) tests fell to it said nothing; a split step's collection
      // holds no tests: a test is judged by the shard that ran it.
      if (ps.shard && rec.state == StepState::Skipped && r.jobs[j].steps[static_cast<std::size_t>(ps.collect_step)].state == StepState::Succeeded) continue;
      if (!test.empty() && ps.split_shards && rec.state == StepState::Succeeded) continue;
      ProbeVerdict v = test.empty() || ps.split_shards ? of_step(rec, name) : of_test(rec, test, name);
      if (!test.empty() && !ps.split_shards && v.outcome != ProbeOutcome::Missing) test_seen = true;
      if (v.outcome == ProbeOutcome::Missing && ps.shard) continue;  // another shard ran it
      if (rank(v.outcome) > rank(out.outcome) || out.detail.empty()) out = v;
    }
  }
  if (!any) return {ProbeOutcome::Missing, "no job '" + job + "' in the run"};
  if (!test.empty() && !test_seen && out.outcome == ProbeOutcome::Pass) return {ProbeOutcome::Missing, test + " is not among the tests the step ran"};
  if (out.outcome == ProbeOutcome::Pass && r.infrastructure_failure)
    return {ProbeOutcome::Inconclusive, "the host failed the run: " + (r.infrastructure_problems.empty() ? std::string() : r.infrastructure_problems.front())};
  return out;
}

}  // namespace pto
