#include "report/run_view.h"

#include <signal.h>

namespace pto {

std::string step_id(int job, int step) { return std::to_string(job + 1) + "-" + std::to_string(step + 1); }

static nlohmann::json nullable(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

nlohmann::json step_to_json(const RunRecord& r, const Plan& p, int job, int step, double now) {
  const PlanStep& ps = p.jobs[job].steps[step];
  const StepRecord& s = r.jobs[job].steps[step];
  nlohmann::json j;
  j["id"] = step_id(job, step);
  j["name"] = ps.name;
  j["state"] = to_string(s.state);
  j["devices"] = ps.devices;
  j["cards"] = s.cards;
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
                                : nlohmann::json("/api/v1/runs/" + r.id + "/steps/" + step_id(job, step) + "/log");
  j["log_path"] = nullable(s.log_path);
  return j;
}

nlohmann::json job_to_json(const RunRecord& r, const Plan& p, int job, double now, bool with_steps) {
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
  if (with_steps) {
    j["steps"] = nlohmann::json::array();
    for (std::size_t s = 0; s < pj.steps.size(); ++s) j["steps"].push_back(step_to_json(r, p, job, static_cast<int>(s), now));
  }
  return j;
}

std::string run_state_name(const RunRecord& r, bool finished, int result) {
  if (!finished) return "running";
  if (r.cancelled) return "cancelled";
  return result == 0 ? "succeeded" : "failed";
}

nlohmann::json run_to_json(const RunRecord& r, const Plan& p, const std::string& state, int result, double now) {
  nlohmann::json j;
  j["id"] = r.id;
  j["state"] = state;
  j["result"] = result >= 0 ? nlohmann::json(result) : nlohmann::json(nullptr);
  j["created"] = r.created;
  j["finished"] = nullable(r.finished);
  j["ptoas_version"] = p.ptoas_version;
  j["infrastructure_problems"] = r.infrastructure_problems;
  j["jobs"] = nlohmann::json::array();
  int steps = 0, done = 0;
  for (std::size_t k = 0; k < p.jobs.size(); ++k) {
    j["jobs"].push_back(job_to_json(r, p, static_cast<int>(k), now));
    for (const auto& s : r.jobs[k].steps) {
      ++steps;
      done += is_final(s.state);
    }
  }
  j["progress"] = {{"steps", steps}, {"finished", done}};
  return j;
}

}  // namespace pto
