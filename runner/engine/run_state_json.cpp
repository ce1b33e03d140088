#include "engine/run_state_json.h"
#include "exec/launch_json.h"

namespace pto {

namespace {

using nlohmann::json;

template <typename T>
T get(const json& j, const char* key, T fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

json evidence_json(const FailureEvidence& e) {
  return {{"cause", to_string(e.cause)}, {"reason", e.reason}, {"matched_line", e.matched_line}, {"pattern", e.pattern}, {"cards", e.cards}};
}

FailureEvidence evidence_from(const json& j) {
  FailureEvidence e;
  e.cause = failure_cause_named(get<std::string>(j, "cause", "code")).value_or(FailureCause::Code);
  e.reason = get<std::string>(j, "reason", "");
  e.matched_line = get<std::string>(j, "matched_line", "");
  e.pattern = get<std::string>(j, "pattern", "");
  e.cards = get<std::vector<int>>(j, "cards", {});
  return e;
}

json failure_json(const StepRecord::Failure& f) {
  return {{"attempt", f.attempt}, {"cards", f.cards}, {"evidence", evidence_json(f.evidence)}, {"card_notes", f.card_notes}, {"lease", f.lease}};
}

StepRecord::Failure failure_from(const json& j) {
  StepRecord::Failure f;
  f.attempt = get<int>(j, "attempt", 0);
  f.cards = get<std::vector<int>>(j, "cards", {});
  f.evidence = evidence_from(j.is_object() && j.contains("evidence") ? j["evidence"] : json::object());
  f.card_notes = get<std::vector<std::string>>(j, "card_notes", {});
  f.lease = get<std::string>(j, "lease", "");
  return f;
}

StepState step_state_named(const std::string& s) {
  for (StepState st : {StepState::Pending, StepState::Waiting, StepState::Running, StepState::Succeeded, StepState::Failed, StepState::TimedOut,
                       StepState::Cancelled, StepState::Skipped, StepState::Deduplicated, StepState::Interrupted, StepState::Reused})
    if (to_string(st) == s) return st;
  return StepState::Pending;
}

JobState job_state_named(const std::string& s) {
  for (JobState st : {JobState::Pending, JobState::Running, JobState::Succeeded, JobState::Failed, JobState::Cancelled, JobState::Skipped})
    if (to_string(st) == s) return st;
  return JobState::Pending;
}

}  // namespace

json step_state_json(const StepRecord& s) {
  // What differs from a fresh step only: step_state_from_json reads a field left out as its default, and most
  // of a step's fifty fields keep it (a daemon writes this for each transition; a waiting step's was 900 bytes).
  json j = json::object();
  j["state"] = to_string(s.state);
  auto text = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  auto number = [&](const char* key, auto v, decltype(v) fallback) {
    if (v != fallback) j[key] = v;
  };
  auto list = [&](const char* key, const auto& v) {
    if (!v.empty()) j[key] = v;
  };
  number("attempt", s.attempt, 0);
  list("cards", s.cards);
  text("node", s.node);
  text("executor_job", s.executor_job);
  text("created", s.created);
  text("runnable", s.runnable);
  text("started", s.started);
  text("finished", s.finished);
  number("runnable_at", s.runnable_at, -1.0);
  number("started_at", s.started_at, -1.0);
  number("finished_at", s.finished_at, -1.0);
  number("queued_at", s.queued_at, -1.0);
  number("exit_code", s.exit_code, -1);
  number("signal", s.signal, 0);
  number("timed_out", s.timed_out, false);
  text("wait_reason", s.wait_reason);
  text("error", s.error);
  text("log_path", s.log_path);
  if (!s.intervals.empty()) {
    json& intervals = j["intervals"] = json::array();
    for (const Interval& i : s.intervals) intervals.push_back({{"start", i.start}, {"end", i.end}, {"cards", i.cards}, {"attempt", i.attempt}});
  }
  if (!s.failures.empty()) {
    json& failures = j["failures"] = json::array();
    for (const auto& f : s.failures) failures.push_back(failure_json(f));
  }
  if (!s.lease_failures.empty()) {
    json& lease_failures = j["lease_failures"] = json::array();
    for (const auto& f : s.lease_failures) lease_failures.push_back(failure_json(f));
  }
  list("leased", s.leased);
  text("lease_markers", s.lease_markers);
  list("charged", s.charged);
  text("cause", s.cause);
  text("verdict", s.verdict);
  list("avoid", s.avoid);
  list("outputs", s.outputs);
  text("summary", s.summary);
  if (!s.caches.empty()) {
    json& caches = j["caches"] = json::object();
    for (const auto& [name, counts] : s.caches) caches[name] = counts.json();
  }
  text("result_key", s.result_key);
  if (s.reused_from)
    j["reused_from"] = {{"run", s.reused_from->run}, {"step", s.reused_from->step}, {"label", s.reused_from->label},
                        {"log", s.reused_from->log}, {"card_seconds", s.reused_from->card_seconds}};
  if (s.perf)
    j["perf"] = {{"samples", s.perf->samples}, {"cards", s.perf->cards}, {"log_offset", s.perf->log_offset},
                 {"change", s.perf->change}, {"verdict", s.perf->verdict}};
  if (!s.tests.empty()) {
    json& tests = j["tests"] = json::array();
    for (const TestCase& c : s.tests) tests.push_back(c.json(true));
  }
  text("tests_error", s.tests_error);
  number("tests_rerun", s.tests_rerun, false);
  list("test_leases", s.test_leases);
  list("test_lease_faults", s.test_lease_faults);
  if (!s.control.base.empty() || !s.control.run.empty() || !s.control.result.empty() || !s.control.note.empty())
    j["control"] = {{"base", s.control.base}, {"run", s.control.run}, {"result", s.control.result}, {"note", s.control.note}};
  list("shard_tests", s.shard_tests);
  number("shard_expected_seconds", s.shard_expected_seconds, -1.0);
  number("collected", s.collected, -1);
  number("collected_unknown", s.collected_unknown, 0);
  number("resolved", s.resolved, false);
  number("order", s.order, std::uint64_t{0});
  if (s.ended) j["ended"] = outcome_json(*s.ended);
  return j;
}

StepRecord step_state_from_json(const json& j) {
  StepRecord s;
  s.state = step_state_named(get<std::string>(j, "state", "pending"));
  s.attempt = get<int>(j, "attempt", 0);
  s.cards = get<std::vector<int>>(j, "cards", {});
  s.node = get<std::string>(j, "node", "");
  s.executor_job = get<std::string>(j, "executor_job", "");
  s.created = get<std::string>(j, "created", "");
  s.runnable = get<std::string>(j, "runnable", "");
  s.started = get<std::string>(j, "started", "");
  s.finished = get<std::string>(j, "finished", "");
  s.runnable_at = get<double>(j, "runnable_at", -1);
  s.started_at = get<double>(j, "started_at", -1);
  s.finished_at = get<double>(j, "finished_at", -1);
  s.queued_at = get<double>(j, "queued_at", -1);
  s.exit_code = get<int>(j, "exit_code", -1);
  s.signal = get<int>(j, "signal", 0);
  s.timed_out = get<bool>(j, "timed_out", false);
  s.wait_reason = get<std::string>(j, "wait_reason", "");
  s.error = get<std::string>(j, "error", "");
  s.log_path = get<std::string>(j, "log_path", "");
  for (const auto& i : get<json>(j, "intervals", json::array()))
    s.intervals.push_back({get<double>(i, "start", 0), get<double>(i, "end", 0), get<std::vector<int>>(i, "cards", {}), get<int>(i, "attempt", 1)});
  for (const auto& f : get<json>(j, "failures", json::array())) s.failures.push_back(failure_from(f));
  for (const auto& f : get<json>(j, "lease_failures", json::array())) s.lease_failures.push_back(failure_from(f));
  s.leased = get<std::vector<int>>(j, "leased", {});
  s.lease_markers = get<std::string>(j, "lease_markers", "");
  s.charged = get<std::vector<int>>(j, "charged", {});
  s.cause = get<std::string>(j, "cause", "");
  s.verdict = get<std::string>(j, "verdict", "");
  s.avoid = get<std::vector<int>>(j, "avoid", {});
  s.outputs = get<std::map<std::string, std::string>>(j, "outputs", {});
  s.summary = get<std::string>(j, "summary", "");
  s.result_key = get<std::string>(j, "result_key", "");
  if (j.contains("reused_from") && j["reused_from"].is_object()) {
    const json& r = j["reused_from"];
    s.reused_from = StepRecord::ReusedFrom{get<std::string>(r, "run", ""), get<std::string>(r, "step", ""), get<std::string>(r, "label", ""),
                                           get<std::string>(r, "log", ""), get<double>(r, "card_seconds", 0)};
  }
  if (j.contains("caches") && j["caches"].is_object())
    for (auto it = j["caches"].begin(); it != j["caches"].end(); ++it) s.caches[it.key()] = CacheCounts::from_json(it.value());
  if (j.contains("perf") && j["perf"].is_object()) {
    const json& p = j["perf"];
    s.perf = StepRecord::Perf{get<std::vector<double>>(p, "samples", {}), get<std::vector<int>>(p, "cards", {}),
                              get<std::uint64_t>(p, "log_offset", 0), get<std::string>(p, "change", ""), get<std::string>(p, "verdict", "")};
  }
  for (const auto& c : get<json>(j, "tests", json::array())) s.tests.push_back(TestCase::from_json(c));
  if (!s.tests.empty()) s.tests_summary = summarize_tests(s.tests);  // derived: its flaky marks are set again
  s.tests_error = get<std::string>(j, "tests_error", "");
  s.tests_rerun = get<bool>(j, "tests_rerun", false);
  s.test_leases = get<std::map<std::string, std::vector<int>>>(j, "test_leases", {});
  s.test_lease_faults = get<std::map<std::string, std::string>>(j, "test_lease_faults", {});
  const json control = get<json>(j, "control", json::object());
  s.control = {get<std::string>(control, "base", ""), get<std::string>(control, "run", ""), get<std::string>(control, "result", ""),
               get<std::string>(control, "note", "")};
  s.shard_tests = get<std::vector<std::string>>(j, "shard_tests", {});
  s.shard_expected_seconds = get<double>(j, "shard_expected_seconds", -1);
  s.collected = get<int>(j, "collected", -1);
  s.collected_unknown = get<int>(j, "collected_unknown", 0);
  s.resolved = get<bool>(j, "resolved", false);
  s.order = get<std::uint64_t>(j, "order", 0);
  if (j.contains("ended") && j["ended"].is_object()) s.ended = outcome_from_json(j["ended"]);
  return s;
}

namespace {

json job_head_json(const JobRecord& jr, bool with_file_env) {
  json j = {{"state", to_string(jr.state)},
          {"started", jr.started},
          {"finished", jr.finished},
          {"started_at", jr.started_at},
          {"finished_at", jr.finished_at},
          {"failed", jr.failed},
          {"cancelled", jr.cancelled},
          {"timed_out", jr.timed_out},
          {"reason", jr.reason},
          {"next_step", jr.next_step},
          {"first_unsettled", jr.first_unsettled},
          {"path_prepend", jr.path_prepend},
          {"outputs", jr.outputs}};
  if (with_file_env) j["file_env"] = jr.file_env;
  return j;
}

}  // namespace

json run_head_json(const RunRecord& r, bool with_file_env) {
  json jobs = json::array();
  for (const JobRecord& jr : r.jobs) jobs.push_back(job_head_json(jr, with_file_env));
  return {{"id", r.id},
          {"created", r.created},
          {"finished", r.finished},
          {"cancelled", r.cancelled},
          {"cancel_signal", r.cancel_signal},
          {"cancel_reason", r.cancel_reason},
          {"superseded_by", r.superseded_by},
          {"infrastructure_failure", r.infrastructure_failure},
          {"infrastructure_problems", r.infrastructure_problems},
          {"toolchain_env", r.toolchain_env},
          {"simulated", r.simulated},
          {"jobs", jobs}};
}

json run_state_json(const RunRecord& r) {
  json j = run_head_json(r);
  for (std::size_t i = 0; i < r.jobs.size(); ++i) {
    json steps = json::array();
    for (const StepRecord& s : r.jobs[i].steps) steps.push_back(step_state_json(s));
    j["jobs"][i]["steps"] = std::move(steps);
  }
  return j;
}

RunRecord run_state_from_json(const json& j) {
  RunRecord r;
  r.id = get<std::string>(j, "id", "");
  r.created = get<std::string>(j, "created", "");
  r.finished = get<std::string>(j, "finished", "");
  r.cancelled = get<bool>(j, "cancelled", false);
  r.cancel_signal = get<int>(j, "cancel_signal", 0);
  r.cancel_reason = get<std::string>(j, "cancel_reason", "");
  r.superseded_by = get<std::string>(j, "superseded_by", "");
  r.infrastructure_failure = get<bool>(j, "infrastructure_failure", false);
  r.infrastructure_problems = get<std::vector<std::string>>(j, "infrastructure_problems", {});
  r.toolchain_env = get<std::map<std::string, std::string>>(j, "toolchain_env", {});
  r.simulated = get<bool>(j, "simulated", false);
  for (const auto& jj : get<json>(j, "jobs", json::array())) {
    JobRecord jr;
    jr.state = job_state_named(get<std::string>(jj, "state", "pending"));
    jr.started = get<std::string>(jj, "started", "");
    jr.finished = get<std::string>(jj, "finished", "");
    jr.started_at = get<double>(jj, "started_at", -1);
    jr.finished_at = get<double>(jj, "finished_at", -1);
    jr.failed = get<bool>(jj, "failed", false);
    jr.cancelled = get<bool>(jj, "cancelled", false);
    jr.timed_out = get<bool>(jj, "timed_out", false);
    jr.reason = get<std::string>(jj, "reason", "");
    jr.next_step = get<std::size_t>(jj, "next_step", 0);
    jr.first_unsettled = get<std::size_t>(jj, "first_unsettled", 0);
    jr.file_env = get<std::map<std::string, std::string>>(jj, "file_env", {});
    jr.path_prepend = get<std::vector<std::string>>(jj, "path_prepend", {});
    jr.outputs = get<std::map<std::string, std::string>>(jj, "outputs", {});
    for (const auto& s : get<json>(jj, "steps", json::array())) jr.steps.push_back(step_state_from_json(s));
    r.jobs.push_back(std::move(jr));
  }
  return r;
}

}  // namespace pto
