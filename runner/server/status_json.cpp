#include "server/status_json.h"
#include "util/api_paths.h"

#include <cmath>

#include "report/run_view.h"
#include "read_model/host_view.h"

namespace pto {

namespace {
double ms(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }
nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
}  // namespace

nlohmann::json run_overview_json(const RunOverview& r) {
  nlohmann::json a = {{"id", r.id},
                      {"state", r.state},
                      {"created", r.created},
                      {"finished", or_null(r.finished)},
                      {"result", r.result >= 0 ? nlohmann::json(r.result) : nlohmann::json(nullptr)},
                      {"url", api_path::run(r.id)},
                      {"sha", r.sha},
                      {"ref", r.ref}};
  if (r.state == "running" || r.state == "cancelling") {
    a["steps"] = r.steps;
    a["steps_finished"] = r.steps_finished;
    a["steps_running"] = r.steps_running;
    a["steps_waiting"] = r.steps_waiting;
    nlohmann::json running = nlohmann::json::array();
    for (const auto& [label, url] : r.running_logs) running.push_back({{"step", label}, {"log_url", url}});
    a["running_steps"] = std::move(running);
  }
  // The Actions run that submitted it, for an on-call engineer to follow back.
  if (!r.github_run.empty()) a["github_run"] = r.github_run;
  return a;
}

nlohmann::json queue_entry_json(const QueueView& q) {
  nlohmann::json e = {{"position", q.position}, {"step", q.label}, {"devices", q.devices}, {"reason", q.reason},
                      {"wait_seconds", ms(q.wait_seconds)}, {"since", q.since}};
  e["eta"] = or_null(q.eta);
  if (q.probe) e["probe"] = true;  // a bisection's probe or a control run: not counted in the oldest wait
  e["eta_seconds"] = q.eta_seconds >= 0 ? nlohmann::json(ms(q.eta_seconds)) : nlohmann::json(nullptr);
  e["why"] = {{"priority", q.priority}, {"priority_rule", or_null(q.priority_rule)},
              {"run_card_seconds", ms(q.run_card_seconds)}, {"fair_share_tag", ms(q.fair_share_tag)}};
  if (!q.run.empty()) {
    e["run"] = q.run;
    e["run_url"] = q.run_url;
  }
  if (!q.step.empty()) {
    e["step_id"] = q.step;
    e["log_url"] = q.log_url;
    e["estimate"] = estimate_to_json(q.estimate.minutes, q.estimate.source, q.estimate.samples);
  }
  return e;
}

nlohmann::json status_to_json(const HostView& v, bool full_queue, double uptime_seconds) {
  nlohmann::json j;
  j["version"] = v.version;
  j["commit"] = v.commit;
  j["started"] = v.started;
  j["uptime_seconds"] = ms(uptime_seconds);
  j["simulate"] = v.simulate;
  j["draining"] = v.draining;
  j["containment"] = v.containment;
  j["supervisor"] = v.supervisor.active ? nlohmann::json{{"pid", v.supervisor.pid}, {"steps", v.supervisor.steps}, {"taken_over", v.supervisor.taken_over}}
                                        : nlohmann::json(nullptr);
  nlohmann::json devices = nlohmann::json::array();
  std::map<std::string, int> by_state;
  for (const auto& c : v.cards) {
    nlohmann::json d = {{"id", c.id}, {"state", c.state}, {"since", c.since}, {"group", c.group},
                        {"type", or_null(c.type)}, {"busy_seconds", ms(c.busy_seconds)}};
    if (c.holder) {
      // other_program: the card's lock file is held by a program pto-runner does not run (the incumbent
      // task-submit, a person's script); the label then says which lock and who.
      d["holder"] = {{"label", c.holder->label}, {"other_program", c.holder->other_program}};
      if (!c.holder->run.empty()) {
        d["holder"]["run"] = c.holder->run;
        d["holder"]["step"] = c.holder->step;
        d["holder"]["log_url"] = c.holder->log_url;
        d["holder"]["estimate"] = estimate_to_json(c.holder->estimate.minutes, c.holder->estimate.source, c.holder->estimate.samples);
      }
    } else {
      d["holder"] = nullptr;
    }
    // The place in the queue of the entry this card is kept free for.
    if (c.reserved_for_position > 0) d["reserved_for"] = c.reserved_for_position;
    d["drain_reason"] = or_null(c.drain_reason);
    d["health"] = {{"state", c.health}, {"evidence", c.evidence}};
    d["consecutive_infra_failures"] = c.consecutive_infra_failures;
    by_state[c.state]++;
    devices.push_back(std::move(d));
  }
  j["devices"] = std::move(devices);
  j["devices_by_state"] = by_state;
  j["executor"] = to_string(v.executor);
  if (v.executor == ExecutorKind::Slurm) {
    // Slurm's nodes, the cards it counts on each, and the steps of ours running there with their cards.
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& n : v.nodes) {
      nlohmann::json steps = nlohmann::json::array();
      for (const auto& st : n.steps)
        steps.push_back({{"slurm_job", st.job}, {"label", st.label}, {"run", st.run}, {"step", st.step},
                         {"cards", st.cards}, {"log_url", st.log_url}});
      nodes.push_back({{"name", n.name}, {"state", n.state}, {"drained", n.drained}, {"reason", or_null(n.reason)},
                       {"features", n.features}, {"cards", n.cards}, {"cards_used", n.cards_used},
                       {"steps", std::move(steps)}});
    }
    j["nodes"] = std::move(nodes);
    j["slurm_problem"] = or_null(v.slurm_problem);
  }
  j["usable_cards"] = v.usable_cards;
  if (v.executor == ExecutorKind::Local)
    j["host"] = {{"cpus", v.cpus}, {"cpus_in_use", v.cpus_in_use}, {"memory_bytes", v.memory}, {"memory_in_use_bytes", v.memory_in_use}};
  j["queue_total"] = v.queue.size();
  j["queue_oldest_wait_seconds"] = ms(v.oldest_wait_seconds);
  nlohmann::json queue = nlohmann::json::array();
  const std::size_t shown = full_queue ? v.queue.size() : std::min<std::size_t>(v.queue.size(), 50);
  for (std::size_t i = 0; i < shown; ++i) {
    const QueueView& q = v.queue[i];
    nlohmann::json e = queue_entry_json(q);
    queue.push_back(std::move(e));
  }
  j["queue"] = std::move(queue);
  j["leases"] = v.leases;
  nlohmann::json active = nlohmann::json::array(), recent = nlohmann::json::array();
  for (const auto& r : v.active) active.push_back(run_overview_json(r));
  for (std::size_t i = 0; i < v.recent.size() && i < 20; ++i) recent.push_back(run_overview_json(v.recent[i]));
  j["active_runs"] = std::move(active);
  j["recent_runs"] = std::move(recent);
  const ToolchainStatus& t = v.toolchain;
  j["toolchain"] = {{"pin", {{"version", t.version.empty() ? v.pin_version : t.version},
                             {"sha256", t.version.empty() ? v.pin_sha256 : t.sha256}}},
                    {"state", t.state},
                    {"root", or_null(t.root)},
                    {"bin", or_null(t.bin)},
                    {"last_verified", or_null(t.last_verified)},
                    {"error", or_null(t.error)},
                    {"run", or_null(t.run)}};
  j["runs_by_result"] = v.runs_by_result;
  j["caches"] = nlohmann::json::object();
  for (const auto& [name, c] : v.caches)
    j["caches"][name] = {{"bytes", c.bytes}, {"hits", c.hits}, {"misses", c.misses},
                         {"hit_ratio", c.hits + c.misses ? static_cast<double>(c.hits) / (c.hits + c.misses) : 0.0}};
  const SandboxView& sb = v.sandbox;
  j["sandbox"] = {{"active", sb.active}, {"why_not", or_null(sb.why_not)}, {"users", sb.users}, {"lent", sb.lent}, {"waiting", sb.waiting}};
  // Where on-call is told (runner.yml notify): a receiver that keeps failing is seen here first.
  j["notify"] = nlohmann::json::array();
  for (const ReceiverStatus& r : v.notify)
    j["notify"].push_back({{"name", r.name},
                           {"kind", r.kind},
                           {"url", r.url},
                           {"pending", r.pending},
                           {"dropped", r.dropped},
                           {"delivered", r.delivered},
                           {"failures", r.failures},
                           {"failing", r.failing},
                           {"failing_since", or_null(r.failing_since)},
                           {"last_error", or_null(r.last_error)},
                           {"last_delivered", or_null(r.last_delivered)}});
  return j;
}

}  // namespace pto
