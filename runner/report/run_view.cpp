#include "report/run_view.h"
#include "plan/plan.h"
#include "util/api_paths.h"
#include "perf/perf_record.h"
#include "util/ids.h"

#include <signal.h>

namespace pto {


static nlohmann::json nullable(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

nlohmann::json estimate_to_json(double minutes, const std::string& source, int samples) {
  if (source.empty()) return nullptr;
  return {{"minutes", minutes}, {"source", source}, {"samples", samples}};
}

nlohmann::json step_to_json(const RunRecord& r, const Plan& p, int job, int step, double now) {
  const PlanStep& ps = p.jobs[job].steps[step];
  const StepRecord& s = r.jobs[job].steps[step];
  nlohmann::json j;
  j["id"] = StepId{static_cast<std::size_t>(job), static_cast<std::size_t>(step)}.text();
  j["name"] = ps.name;
  j["label"] = step_label(p.jobs[job], ps);
  j["state"] = to_string(s.state);
  j["devices"] = ps.devices;
  j["cpus"] = ps.cpus;
  j["memory_bytes"] = ps.memory;
  j["device_type"] = ps.device_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(ps.device_type);
  j["estimate"] = estimate_to_json(ps.expected_minutes, ps.expected_source, ps.expected_samples);
  j["cards"] = s.cards;
  if (!s.node.empty()) j["node"] = s.node;
  if (!s.executor_job.empty()) j["slurm_job"] = s.executor_job;
  j["attempt"] = s.attempt;
  j["created"] = nullable(s.created);
  j["runnable"] = nullable(s.runnable);
  j["started"] = nullable(s.started);
  j["finished"] = nullable(s.finished);
  j["exit_code"] = s.exit_code >= 0 ? nlohmann::json(s.exit_code) : nlohmann::json(nullptr);
  j["signal"] = s.signal ? nlohmann::json(s.signal) : nlohmann::json(nullptr);
  j["timed_out"] = s.timed_out;
  j["deduplicated_from"] = ps.deduplicated_from ? nlohmann::json(p.jobs[job].steps[*ps.deduplicated_from].name)
                                                : nlohmann::json(nullptr);
  j["key"] = ps.key;
  j["error"] = nullable(s.error);
  j["wait_reason"] = s.state == StepState::Waiting ? nullable(s.wait_reason) : nlohmann::json(nullptr);
  double waited = s.runnable_at < 0 ? 0 : (s.started_at >= 0 ? s.started_at : (s.state == StepState::Waiting ? now : s.runnable_at)) - s.runnable_at;
  j["wait_seconds"] = waited;
  j["duration_seconds"] = s.started_at >= 0 ? (s.finished_at >= 0 ? s.finished_at : now) - s.started_at : 0.0;
  j["log"] = s.log_path.empty() ? nlohmann::json(nullptr)
                                : nlohmann::json(api_path::step_log(r.id, StepId{static_cast<std::size_t>(job), static_cast<std::size_t>(step)}.text()));
  j["log_path"] = nullable(s.log_path);
  if (s.reused_from) j["log"] = s.reused_from->log;
  if (!ps.id.empty()) j["step_id"] = ps.id;
  j["outputs"] = s.outputs;
  j["summary"] = nullable(s.summary);
  if (s.reused_from)  // it did not run: its verdict, tests and log are those of the step it came from
    j["reused_from"] = {{"run", s.reused_from->run}, {"step", s.reused_from->step}, {"label", s.reused_from->label},
                        {"log", s.reused_from->log}, {"card_seconds", s.reused_from->card_seconds},
                        {"text", "reused from run " + s.reused_from->run + ", step " + s.reused_from->label}};
  if (s.reused_from && ps.tests.any()) j["reused_from"]["tests"] = api_path::run_tests(s.reused_from->run);  // its cases are that run's
  if (ps.perf) {  // a benchmark (engine/engine_perf.cpp): its samples and how they were judged
    nlohmann::json perf = {{"metric", ps.perf->name}, {"unit", ps.perf->unit}, {"better", ps.perf->lower_is_better ? "lower" : "higher"},
                           {"compare", ps.perf->compare == PerfSpec::Compare::Base ? "base" : "history"}, {"gate", ps.perf->gate},
                           {"samples", nlohmann::json::array()}, {"cards", nlohmann::json::array()}, {"median", nullptr},
                           {"change", nullptr}, {"verdict", nullptr}};
    if (s.perf) {
      perf["samples"] = s.perf->samples;
      perf["cards"] = s.perf->cards;
      if (!s.perf->samples.empty()) perf["median"] = median_of(s.perf->samples);
      perf["change"] = nullable(s.perf->change);
      perf["verdict"] = nullable(s.perf->verdict);
    }
    j["perf"] = perf;
  }
  if (!s.caches.empty()) {  // its ccaches' calls, hits and misses (caches/ccache_stats)
    j["caches"] = nlohmann::json::object();
    for (const auto& [name, c] : s.caches) j["caches"][name] = c.json();
  }
  // Every red is true: each failed attempt's cause and evidence, the step's cause and its verdict.
  j["cause"] = nullable(s.cause);
  j["verdict"] = nullable(s.verdict);
  // Its attempts' failures, and its harness's leases that failed (task-submit said how their commands
  // ended), each with its cause and evidence.
  auto failures_json = [](const std::vector<StepRecord::Failure>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : list) {
      nlohmann::json e = f.evidence.json();
      e["attempt"] = f.attempt;
      if (!f.lease.empty()) e["lease"] = f.lease;
      e["ran_on"] = f.cards;
      e["card_notes"] = f.card_notes;
      out.push_back(std::move(e));
    }
    return out;
  };
  j["control"] = s.control.base.empty() ? nlohmann::json(nullptr)
                                         : nlohmann::json{{"base", s.control.base}, {"run", nullable(s.control.run)}, {"result", s.control.result},
                                                          {"note", s.control.note}};
  j["failures"] = failures_json(s.failures);
  j["lease_failures"] = failures_json(s.lease_failures);
  // A split step's collection stands for the step: its shards and their tests summed. Each shard says its part.
  if (ps.split_shards) j["split"] = split_to_json(r, p, job, step, now);
  else if (ps.tests.any() && !r.simulated) j["tests"] = step_tests_json(r, p, job, step);
  if (ps.shard)
    j["shard"] = {{"index", ps.shard},
                  {"count", ps.shard_count},
                  {"collect_step", StepId{static_cast<std::size_t>(job), static_cast<std::size_t>(ps.collect_step)}.text()},
                  {"tests", s.shard_tests.size()},
                  {"expected_seconds", s.shard_expected_seconds >= 0 ? nlohmann::json(s.shard_expected_seconds) : nlohmann::json(nullptr)},
                  {"seconds", s.started_at >= 0 && s.finished_at >= 0 ? nlohmann::json(s.finished_at - s.started_at) : nlohmann::json(nullptr)}};
  return j;
}

nlohmann::json split_to_json(const RunRecord& r, const Plan& p, int job, int step, double now) {
  const PlanJob& pj = p.jobs[job];
  const StepRecord& c = r.jobs[job].steps[static_cast<std::size_t>(step)];
  nlohmann::json shards = nlohmann::json::array();
  TestsSummary sum;
  for (std::size_t k = 0; k < pj.steps.size(); ++k) {
    if (pj.steps[k].collect_step != step || !pj.steps[k].shard) continue;
    const StepRecord& s = r.jobs[job].steps[k];
    const TestsSummary& t = s.tests_summary;
    sum.ran += t.ran, sum.passed += t.passed, sum.failed += t.failed, sum.victims += t.victims, sum.skipped += t.skipped;
    sum.flaky += t.flaky, sum.recovered += t.recovered, sum.muted += t.muted, sum.rerun += t.rerun;
    const double seconds = s.started_at < 0 ? -1 : (s.finished_at >= 0 ? s.finished_at : now) - s.started_at;
    shards.push_back({{"step", StepId{static_cast<std::size_t>(job), k}.text()},
                      {"index", pj.steps[k].shard},
                      {"state", to_string(s.state)},
                      {"tests", s.shard_tests.size()},
                      {"expected_seconds", s.shard_expected_seconds >= 0 ? nlohmann::json(s.shard_expected_seconds) : nlohmann::json(nullptr)},
                      {"seconds", seconds >= 0 ? nlohmann::json(seconds) : nlohmann::json(nullptr)}});
  }
  return {{"by", "duration"},
          {"collected", c.collected >= 0 ? nlohmann::json(c.collected) : nlohmann::json(nullptr)},
          {"without_duration", c.collected_unknown},
          {"shards", shards},
          {"tests", {{"ran", sum.ran}, {"passed", sum.passed}, {"failed", sum.failed}, {"victims", sum.victims}, {"skipped", sum.skipped},
                     {"flaky", sum.flaky}, {"recovered", sum.recovered}, {"muted", sum.muted}, {"rerun", sum.rerun}}}};
}

nlohmann::json step_tests_json(const RunRecord& r, const Plan& p, int job, int step) {
  const PlanStep& ps = p.jobs[job].steps[step];
  const StepRecord& s = r.jobs[job].steps[step];
  const TestsSummary& t = s.tests_summary;
  nlohmann::json j = {{"format", ps.tests.format == TestsSpec::Format::Pytest ? "pytest" : "junit"},
                      {"ran", t.ran},
                      {"passed", t.passed},
                      {"failed", t.failed},
                      {"victims", t.victims},
                      {"skipped", t.skipped},
                      {"flaky", t.flaky},
                      {"recovered", t.recovered},
                      {"muted", t.muted},
                      {"rerun", t.rerun}};
  j["error"] = nullable(s.tests_error);
  j["verdict"] = nullable(t.verdict);
  // Each test's last attempt, when it is a failure: what a person reads first (submit, the summary, the page).
  const std::string log = s.log_path.empty() ? "" : api_path::step_log(r.id, StepId{static_cast<std::size_t>(job), static_cast<std::size_t>(step)}.text());
  j["failed_tests"] = nlohmann::json::array();
  for (const std::string& id : t.unresolved)
    for (auto it = s.tests.rbegin(); it != s.tests.rend(); ++it)
      if (it->id == id) {
        nlohmann::json c = it->json();
        if (!log.empty()) c["log"] = log;
        j["failed_tests"].push_back(std::move(c));
        break;
      }
  j["cases"] = nlohmann::json::array();
  for (const TestCase& c : s.tests) j["cases"].push_back(c.json());
  return j;
}

nlohmann::json job_to_json(const RunRecord& r, const Plan& p, int job, double now, bool with_steps, const StepFilter& only) {
  const PlanJob& pj = p.jobs[job];
  const JobRecord& jr = r.jobs[job];
  nlohmann::json j;
  j["id"] = pj.id;
  j["name"] = pj.name;
  j["lead"] = pj.lead;
  j["needs"] = pj.needs;
  j["state"] = to_string(jr.state);
  j["reason"] = nullable(jr.reason);
  j["started"] = nullable(jr.started);
  j["finished"] = nullable(jr.finished);
  j["outputs"] = jr.outputs;
  if (with_steps) {
    j["steps"] = nlohmann::json::array();
    for (std::size_t s = 0; s < pj.steps.size(); ++s)
      if (!only || only(job, static_cast<int>(s))) j["steps"].push_back(step_to_json(r, p, job, static_cast<int>(s), now));
  }
  return j;
}

std::string failed_tests_text(const nlohmann::json& step, const std::string& server, std::size_t max) {
  if (!step.contains("tests") || !step["tests"].is_object()) return "";
  const nlohmann::json failed = step["tests"].value("failed_tests", nlohmann::json::array());
  std::string out;
  std::size_t shown = 0;
  for (const auto& c : failed) {
    if (shown == max) {
      out += "    ... and " + std::to_string(failed.size() - max) + " more failed tests\n";
      break;
    }
    ++shown;
    std::string cards;
    for (const auto& card : c.value("cards", nlohmann::json::array())) cards += (cards.empty() ? "" : ",") + card.dump();
    const std::string message = c.contains("message") && c["message"].is_string() ? c["message"].get<std::string>() : "";
    out += "    FAILED " + c.value("id", "") + " [" + (c["cause"].is_string() ? c["cause"].get<std::string>() : c.value("result", "")) +
           (cards.empty() ? "" : (cards.find(',') == std::string::npos ? ", card " : ", cards ") + cards) + "]" +
           (message.empty() ? "" : ": " + message.substr(0, message.find('\n'))) +
           (c.contains("log") && c["log"].is_string() ? " (log: " + server + c["log"].get<std::string>() + ")" : "") + "\n";
  }
  return out;
}

std::string describe_step_end(const nlohmann::json& s) {
  if (s.contains("error") && s["error"].is_string()) return s["error"].get<std::string>();
  if (s.value("timed_out", false)) return "timed out";
  if (s.contains("signal") && s["signal"].is_number()) return "signal " + std::to_string(s["signal"].get<int>());
  if (s.contains("exit_code") && s["exit_code"].is_number()) return "exit " + std::to_string(s["exit_code"].get<int>());
  return "";
}

std::string format_duration(double seconds) {
  char buf[32];
  if (seconds < 0) return "-";
  if (seconds < 60) std::snprintf(buf, sizeof(buf), "%.1fs", seconds);
  else std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
  return buf;
}

std::string markdown_summary(const nlohmann::json& run) {
  auto cell = [](const std::string& s) {
    std::string out;
    for (char c : s) out += c == '|' ? std::string("\\|") : c == '\n' || c == '\r' ? std::string(" ") : std::string(1, c);
    return out;
  };
  std::string out = "### pto-runner run " + run.value("id", "") + "\n\n| Job | Step | State | Waited | Duration | Cards | Exit |\n"
                    "|---|---|---|---|---|---|---|\n";
  for (const auto& job : run["jobs"])
    for (const auto& s : job["steps"]) {
      std::string cards;
      for (const auto& c : s["cards"]) cards += (cards.empty() ? "" : ",") + std::to_string(c.get<int>());
      std::string exit = describe_step_end(s);
      bool ran = !s["started"].is_null();
      // The wait for cards, and what it was expected to be when `submit` first saw the step queued.
      std::string waited = ran && s.value("wait_seconds", 0.0) > 0 ? format_duration(s.value("wait_seconds", 0.0)) : "-";
      if (ran && s.contains("expected_wait_seconds") && s["expected_wait_seconds"].is_number())
        waited += " (expected " + format_duration(s["expected_wait_seconds"].get<double>()) + ")";
      // A step with failed attempts says what they were charged to (its verdict) in place of its exit.
      if (s.contains("verdict") && s["verdict"].is_string()) exit = s["verdict"].get<std::string>();
      out += "| " + cell(job.value("id", "")) + " | " + cell(s.value("name", "")) + " | " + s.value("state", "") + " | " + waited + " | " +
             (ran ? format_duration(s.value("duration_seconds", 0.0)) : "-") + " | " + (cards.empty() ? "-" : cards) +
             " | " + cell(exit.empty() ? "-" : exit) + " |\n";
    }
  out += "\n";
  // Each step's failed tests, below the table: what a reviewer looks for first.
  std::string failed;
  for (const auto& job : run["jobs"])
    for (const auto& s : job["steps"]) {
      if (!s.contains("tests") || !s["tests"].is_object()) continue;
      for (const auto& c : s["tests"].value("failed_tests", nlohmann::json::array())) {
        std::string cards;
        for (const auto& card : c.value("cards", nlohmann::json::array())) cards += (cards.empty() ? "" : ",") + card.dump();
        const std::string message = c.contains("message") && c["message"].is_string() ? c["message"].get<std::string>() : "";
        failed += "| " + cell(s.value("name", "")) + " | `" + cell(c.value("id", "")) + "` | " +
                  (c["cause"].is_string() ? c["cause"].get<std::string>() : "-") + " | " + (cards.empty() ? "-" : cards) + " | " +
                  cell(message.substr(0, std::min<std::size_t>(message.find('\n'), 200))) + " |\n";
      }
    }
  if (!failed.empty()) out += "#### Failed tests\n\n| Step | Test | Cause | Cards | Message |\n|---|---|---|---|---|\n" + failed + "\n";
  // What the steps wrote to their own $GITHUB_STEP_SUMMARY follows, in step order, as GitHub shows them; the
  // whole stays within GitHub's 1 MiB for one step's summary (past it GitHub would drop all of it, the table
  // too), so summaries that do not fit are named instead.
  constexpr std::size_t kLimit = 1 << 20, kRoomForNotes = 16 << 10;
  std::vector<std::string> left_out;
  for (const auto& job : run["jobs"])
    for (const auto& s : job["steps"])
      if (s.contains("summary") && s["summary"].is_string() && !s["summary"].get<std::string>().empty()) {
        std::string text = s["summary"];
        text += text.back() == '\n' ? "\n" : "\n\n";
        if (out.size() + text.size() + kRoomForNotes > kLimit) left_out.push_back(step_label(job.value("id", ""), s.value("name", "")));
        else out += text;
      }
  if (!left_out.empty()) {
    out += "*Left out to stay within GitHub's 1 MiB summary: the summaries of ";
    for (std::size_t i = 0; i < left_out.size() && out.size() < kLimit - 1024; ++i) out += (i ? ", " : "") + cell(left_out[i]);
    out += " (in the run's JSON).*\n";
  }
  return out;
}

std::string run_state_name(const RunRecord& r, bool finished, int result) {
  if (!finished) return "running";
  if (r.cancelled && !r.infrastructure_failure) return "cancelled";
  return result == 0 ? "succeeded" : "failed";
}

nlohmann::json run_to_json(const RunRecord& r, const Plan& p, const std::string& state, int result, double now, const StepFilter& only) {
  nlohmann::json j;
  j["id"] = r.id;
  j["state"] = state;
  j["result"] = result >= 0 ? nlohmann::json(result) : nlohmann::json(nullptr);
  j["created"] = r.created;
  j["finished"] = nullable(r.finished);
  j["ptoas_version"] = p.ptoas_version;
  j["infrastructure_problems"] = r.infrastructure_problems;
  if (!r.cancel_reason.empty()) j["cancel_reason"] = r.cancel_reason;
  if (!r.superseded_by.empty()) j["superseded_by"] = r.superseded_by;
  if (r.simulated) j["simulated"] = true;
  j["jobs"] = nlohmann::json::array();
  int steps = 0, done = 0;
  for (std::size_t k = 0; k < p.jobs.size(); ++k) {
    j["jobs"].push_back(job_to_json(r, p, static_cast<int>(k), now, true, only));
    for (const auto& s : r.jobs[k].steps) {
      ++steps;
      done += is_final(s.state);
    }
  }
  j["progress"] = {{"steps", steps}, {"finished", done}};
  // The run's caches: each one's counts over its steps, with the tier it wrote.
  std::map<std::string, CacheCounts> caches;
  for (const auto& jr : r.jobs)
    for (const auto& s : jr.steps)
      for (const auto& [name, c] : s.caches) caches[name] += c;
  if (!caches.empty()) {
    j["caches"] = nlohmann::json::object();
    for (const auto& [name, c] : caches) {
      j["caches"][name] = c.json();
      j["caches"][name]["hit_ratio"] = c.calls ? static_cast<double>(c.hits) / c.calls : 0.0;
    }
  }
  return j;
}

}  // namespace pto
