#include "report/plan_view.h"

#include "util/byte_size.h"

#include <sstream>

namespace pto {

nlohmann::json plan_step_to_json(const PlanJob& job, const PlanStep& s) {
  nlohmann::json j;
  j["index"] = s.index;
  j["name"] = s.name;
  j["kind"] = s.kind == StepKind::ToolchainSetup ? "toolchain-setup" : s.kind == StepKind::CollectTests ? "collect-tests" : "command";
  j["run"] = s.run;
  j["shell"] = s.shell;
  j["working_directory"] = s.working_directory;
  j["env"] = s.env;
  j["if"] = s.if_expr.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.if_expr);
  j["devices"] = s.devices;
  j["cpus"] = s.cpus;
  j["memory_bytes"] = s.memory;
  j["split"] = s.split_shards ? nlohmann::json{{"shards", s.split_shards}, {"by", "duration"}} : nlohmann::json(nullptr);
  if (s.shard) j["shard"] = {{"index", s.shard}, {"count", s.shard_count}, {"collect_step", s.collect_step}};
  j["device_type"] = s.device_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.device_type);
  auto minutes = [](const std::optional<double>& m) { return m ? nlohmann::json(*m) : nlohmann::json(nullptr); };
  j["timeout_minutes"] = minutes(s.timeout_minutes);
  j["queue_timeout_minutes"] = minutes(s.queue_timeout_minutes);
  j["run_timeout_minutes"] = minutes(s.run_timeout_minutes);
  j["expected_minutes"] = s.expected_minutes;
  j["expected_source"] = s.expected_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.expected_source);
  if (s.expected_source == "history") j["expected_samples"] = s.expected_samples;
  j["continue_on_error"] = s.continue_on_error;
  j["retry"] = {{"max", s.retry.max}, {"on_exit_codes", s.retry.on_exit_codes}};
  j["key"] = s.key;
  if (s.deduplicated_from) {
    j["deduplicated_from"] = job.steps[*s.deduplicated_from].name;
    j["deduplicated_from_index"] = *s.deduplicated_from;
  } else {
    j["deduplicated_from"] = nullptr;
    j["deduplicated_from_index"] = nullptr;
  }
  j["origin"] = s.origin;
  j["source"] = s.source;
  if (!s.model.empty()) j["model"] = {{"file", s.model}, {"example", s.example}};
  j["perf"] = s.perf ? nlohmann::json{{"metric", s.perf->name}, {"pattern", s.perf->metric}, {"unit", s.perf->unit},
                                      {"better", s.perf->lower_is_better ? "lower" : "higher"}, {"samples", s.perf->sample_count()},
                                      {"compare", s.perf->compare == PerfSpec::Compare::Base ? "base" : "history"},
                                      {"threshold_pct", s.perf->threshold_pct}, {"gate", s.perf->gate}}
                     : nlohmann::json(nullptr);
  return j;
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json out;
  out["ptoas_version"] = plan.ptoas_version;
  out["arch"] = plan.arch;
  out["devices"] = {{"pool", plan.pool_size}, {"largest_gang", plan.largest_gang}};
  nlohmann::json jobs = nlohmann::json::array();
  int steps = 0, device_steps = 0;
  for (const auto& job : plan.jobs) {
    nlohmann::json j;
    j["id"] = job.id;
    j["name"] = job.name;
    j["file"] = job.file;
    j["lead"] = job.lead;
    j["needs"] = job.needs;
    nlohmann::json matrix = nlohmann::json::object();
    for (const auto& [k, v] : job.matrix) matrix[k] = v;
    j["matrix"] = matrix;
    j["if"] = job.if_expr.empty() ? nlohmann::json(nullptr) : nlohmann::json(job.if_expr);
    j["env"] = job.env;
    j["parallel"] = job.parallel;
    j["toolchain"] = job.toolchain;
    j["fail_fast"] = job.fail_fast;
    j["max_parallel"] = job.max_parallel ? nlohmann::json(job.max_parallel) : nlohmann::json(nullptr);
    j["continue_on_error"] = job.continue_on_error;
    j["timeout_minutes"] = job.timeout_minutes ? nlohmann::json(*job.timeout_minutes) : nlohmann::json(nullptr);
    j["steps"] = nlohmann::json::array();
    for (const auto& s : job.steps) {
      j["steps"].push_back(plan_step_to_json(job, s));
      ++steps;
      device_steps += s.devices > 0 && !s.deduplicated_from;
    }
    jobs.push_back(std::move(j));
  }
  out["jobs"] = std::move(jobs);
  out["summary"] = {{"jobs", plan.jobs.size()},
                    {"steps", steps},
                    {"deduplicated", plan.deduplicated_count()},
                    {"device_steps", device_steps}};
  return out;
}

std::string plan_to_text(const Plan& plan) {
  std::ostringstream os;
  int steps = 0;
  for (const auto& j : plan.jobs) steps += static_cast<int>(j.steps.size());
  os << "Plan: " << plan.jobs.size() << " jobs, " << steps << " steps (" << plan.deduplicated_count()
     << " deduplicated); PTOAS " << plan.ptoas_version << " for " << plan.arch << "; pool of " << plan.pool_size
     << " cards\n";
  int n = 0;
  for (const auto& job : plan.jobs) {
    os << "\n[" << ++n << "] " << job.id;
    if (job.lead) os << "  (lead job: toolchain)";
    if (!job.needs.empty()) {
      os << "  needs: ";
      for (std::size_t i = 0; i < job.needs.size(); ++i) os << (i ? ", " : "") << job.needs[i];
    }
    if (job.parallel) os << "  parallel";
    if (job.max_parallel) os << "  max-parallel " << job.max_parallel;
    if (!job.if_expr.empty()) os << "  if: " << job.if_expr;
    os << "\n";
    for (const auto& s : job.steps) {
      os << "    " << (s.index + 1) << ". " << s.name;
      if (s.devices)
        os << "  [" << s.devices << (s.devices == 1 ? " card" : " cards") << (s.device_type.empty() ? "" : " of type " + s.device_type)
           << "]";
      if (s.cpus || s.memory) os << "  [" << host_share_words(s.cpus, s.memory) << "]";
      if (s.split_shards) os << "  [collects the tests of " << s.split_shards << " shards, split by duration]";
      if (s.perf)
        os << "  [perf " << s.perf->name << ": " << s.perf->sample_count()
           << (s.perf->compare == PerfSpec::Compare::Base ? " pairs at most against the merge base" : " samples against history")
           << (s.perf->gate ? ", gated" : "") << "]";
      if (s.kind == StepKind::Command && !s.deduplicated_from) os << "  " << estimate_text(s);
      if (s.deduplicated_from)
        os << "  -- deduplicated: same work as step " << (*s.deduplicated_from + 1) << " ("
           << job.steps[*s.deduplicated_from].name << "), not run";
      os << "\n";
      if (!s.deduplicated_from) {
        std::string run = s.run.substr(0, s.run.find('\n'));
        if (run.size() > 100) run = run.substr(0, 97) + "...";
        os << "       $ " << run << (s.run.find('\n') != std::string::npos ? " ..." : "") << "\n";
      }
    }
  }
  return os.str();
}

std::string estimate_text(const PlanStep& s) {
  if (s.expected_source.empty()) return "no estimate";
  char buf[96];
  if (s.expected_source == "history")
    std::snprintf(buf, sizeof(buf), "~%.1f min (learned: p90 of %d runs)", s.expected_minutes, s.expected_samples);
  else
    std::snprintf(buf, sizeof(buf), "~%.1f min (expected-minutes)", s.expected_minutes);
  return buf;
}

}  // namespace pto
