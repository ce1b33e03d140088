#include "server/metrics.h"

#include <charconv>
#include <cmath>

#include "read_model/host_view.h"

namespace pto {

namespace {

// The exposition format's numbers: integers as integers, others shortest round-trip, +Inf/-Inf/NaN spelled.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];  // a double's shortest form is at most 24 characters
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// Label values: backslash, double quote and line feed escaped (the format's only rules).
std::string escape_label(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label_text(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i)
    out += (i ? "," : "") + labels[i].first + "=\"" + escape_label(labels[i].second) + "\"";
  return out + "}";
}

// HELP text: backslash and line feed escaped.
std::string escape_help(const std::string& v) {
  std::string out;
  for (char c : v) out += c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
  return out;
}

}  // namespace

void PromText::family(const std::string& name, const char* type, const std::string& help) {
  out_ += "# HELP " + name + " " + escape_help(help) + "\n# TYPE " + name + " " + type + "\n";
}

void PromText::sample(const std::string& name, const Labels& labels, double value) {
  out_ += name + label_text(labels) + " " + number(value) + "\n";
}

void PromText::histogram(const std::string& name, const Labels& labels, const Histogram& h) {
  long long cumulative = 0;
  for (std::size_t i = 0; i < h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    Labels l = labels;
    l.emplace_back("le", number(h.bounds()[i]));
    sample(name + "_bucket", l, static_cast<double>(cumulative));
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  sample(name + "_bucket", inf, static_cast<double>(h.count()));
  sample(name + "_sum", labels, h.sum());
  sample(name + "_count", labels, static_cast<double>(h.count()));
}

std::string render_metrics(const HostView& v, const Metrics& m, double uptime_seconds) {
  PromText p;
  p.family("pto_runner_build_info", "gauge", "Version and git commit of this pto-runner (always 1)");
  p.sample("pto_runner_build_info", {{"version", v.version}, {"commit", v.commit}}, 1);
  p.family("pto_runner_uptime_seconds", "gauge", "Seconds since the daemon started");
  p.sample("pto_runner_uptime_seconds", {}, uptime_seconds);
  p.family("pto_runner_draining", "gauge", "1 while the daemon drains after SIGTERM (no new runs)");
  p.sample("pto_runner_draining", {}, v.draining ? 1 : 0);
  p.family("pto_runner_journal_write_failing", "gauge", "1 while journal writes fail (disk full, I/O error)");
  p.sample("pto_runner_journal_write_failing", {}, m.journal_failing ? 1 : 0);

  if (v.executor == ExecutorKind::Local) {
    p.family("pto_runner_host_cpus", "gauge", "The host's CPUs steps may ask for (runner.yml host.cpus, else the machine's), and those running steps asked for");
    p.sample("pto_runner_host_cpus", {{"state", "total"}}, v.cpus);
    p.sample("pto_runner_host_cpus", {{"state", "in_use"}}, v.cpus_in_use);
    p.family("pto_runner_host_memory_bytes", "gauge", "The host's memory steps may ask for (runner.yml host.memory, else the machine's), and what running steps asked for");
    p.sample("pto_runner_host_memory_bytes", {{"state", "total"}}, static_cast<double>(v.memory));
    p.sample("pto_runner_host_memory_bytes", {{"state", "in_use"}}, static_cast<double>(v.memory_in_use));
  }
  static const char* kStates[] = {"free", "busy", "reserved", "drained"};
  std::map<std::string, int> by_state;
  for (const char* s : kStates) by_state[s] = 0;
  for (const auto& c : v.cards) by_state[c.state]++;
  p.family("pto_runner_cards", "gauge", "NPU cards by state");
  for (const auto& [s, n] : by_state) p.sample("pto_runner_cards", {{"state", s}}, n);
  p.family("pto_runner_card_state", "gauge", "1 for the state each card is in, 0 for the others");
  for (const auto& c : v.cards)
    for (const char* s : kStates)
      p.sample("pto_runner_card_state", {{"card", std::to_string(c.id)}, {"type", c.type}, {"state", s}}, c.state == s ? 1 : 0);
  p.family("pto_runner_card_health", "gauge", "1 for the health state each card is in (good, suspect, bad, probing, maintenance, retired), 0 for the others");
  for (const auto& c : v.cards)
    for (const char* h : {"good", "suspect", "bad", "probing", "maintenance", "retired"})
      p.sample("pto_runner_card_health", {{"card", std::to_string(c.id)}, {"state", h}}, c.health == h ? 1 : 0);
  p.family("pto_runner_card_busy_seconds_total", "counter", "Seconds each card was held by a step, lease or health check");
  for (const auto& c : v.cards) p.sample("pto_runner_card_busy_seconds_total", {{"card", std::to_string(c.id)}}, c.busy_seconds);

  if (v.executor == ExecutorKind::Slurm) {
    // executor: slurm — Slurm's nodes and cards, our steps on each, and why ours wait (Slurm's reason).
    p.family("pto_runner_slurm_node_cards", "gauge", "Cards of the configured GRES on each Slurm node, in use or not");
    for (const auto& n : v.nodes) {
      p.sample("pto_runner_slurm_node_cards", {{"node", n.name}, {"state", "used"}}, n.cards_used);
      p.sample("pto_runner_slurm_node_cards", {{"node", n.name}, {"state", "idle"}}, std::max(0, n.cards - n.cards_used));
    }
    p.family("pto_runner_slurm_node_drained", "gauge", "1 when Slurm drains (or has downed) the node");
    for (const auto& n : v.nodes) p.sample("pto_runner_slurm_node_drained", {{"node", n.name}}, n.drained ? 1 : 0);
    p.family("pto_runner_slurm_running_steps", "gauge", "Steps of ours running on each Slurm node");
    for (const auto& n : v.nodes) p.sample("pto_runner_slurm_running_steps", {{"node", n.name}}, static_cast<double>(n.steps.size()));
    std::map<std::string, int> reasons;
    for (const auto& q : v.queue)
      if (!q.cluster_reason.empty()) reasons[q.cluster_reason]++;
    p.family("pto_runner_slurm_pending_steps", "gauge", "Steps of ours pending in Slurm, by Slurm's reason");
    for (const auto& [reason, n] : reasons) p.sample("pto_runner_slurm_pending_steps", {{"reason", reason}}, n);
  }

  p.family("pto_runner_queue_length", "gauge", "Steps and leases waiting for cards");
  p.sample("pto_runner_queue_length", {}, static_cast<double>(v.queue.size()));
  p.family("pto_runner_queue_oldest_wait_seconds", "gauge", "How long the longest-waiting entry of the queue has waited (a bisection's probes and control runs, which wait below everything, left out)");
  p.sample("pto_runner_queue_oldest_wait_seconds", {}, v.oldest_wait_seconds);

  int lease_waiting = 0, lease_granted = 0;
  for (const auto& l : v.leases) (l.value("state", "") == "waiting" ? lease_waiting : lease_granted)++;
  p.family("pto_runner_leases", "gauge", "Card leases (task-submit) by state");
  p.sample("pto_runner_leases", {{"state", "waiting"}}, lease_waiting);
  p.sample("pto_runner_leases", {{"state", "granted"}}, lease_granted);
  p.family("pto_runner_leases_ended_total", "counter", "Card leases ended, by how");
  for (const auto& [how, n] : m.leases_by_end) p.sample("pto_runner_leases_ended_total", {{"reason", how}}, static_cast<double>(n));
  p.family("pto_runner_lease_duration_seconds", "histogram", "Time a granted lease held its cards, by how it ended");
  for (const auto& [how, h] : m.lease_seconds.by_label()) p.histogram("pto_runner_lease_duration_seconds", {{"reason", how}}, h);

  p.family("pto_runner_active_runs", "gauge", "Runs in progress");
  p.sample("pto_runner_active_runs", {}, static_cast<double>(v.active.size()));
  p.family("pto_runner_wait_seconds", "histogram", "Time a step waited from runnable to started");
  p.histogram("pto_runner_wait_seconds", {}, m.wait_seconds);
  p.family("pto_runner_step_duration_seconds", "histogram", "Time from a step's start to its end, by result");
  for (const auto& [result, h] : m.step_seconds.by_label()) p.histogram("pto_runner_step_duration_seconds", {{"result", result}}, h);
  p.family("pto_runner_steps_total", "counter", "Finished steps by result");
  for (const auto& [r, n] : m.steps_by_result) p.sample("pto_runner_steps_total", {{"result", r}}, static_cast<double>(n));
  p.family("pto_runner_failures_total", "counter", "Failed attempts of steps by the cause they were charged to");
  for (const char* c : {"code", "flaky", "card", "infra", "timeout"}) {
    auto it = m.failures_by_cause.find(c);
    p.sample("pto_runner_failures_total", {{"cause", c}}, it == m.failures_by_cause.end() ? 0.0 : static_cast<double>(it->second));
  }
  p.family("pto_runner_retries_total", "counter", "Attempts retried, by the cause of the failure before them");
  for (const char* c : {"code", "flaky", "card", "infra"}) {
    auto it = m.retries_by_cause.find(c);
    p.sample("pto_runner_retries_total", {{"cause", c}}, it == m.retries_by_cause.end() ? 0.0 : static_cast<double>(it->second));
  }
  p.family("pto_runner_tests_total", "counter", "Test cases of finished steps with tests:, by their last result");
  for (const char* r : {"passed", "failed", "error", "skipped", "muted", "victim"}) {
    auto it = m.tests_by_result.find(r);
    p.sample("pto_runner_tests_total", {{"result", r}}, it == m.tests_by_result.end() ? 0.0 : static_cast<double>(it->second));
  }
  p.family("pto_runner_steps_reused_total", "counter", "Steps not run: an earlier green result of the same inputs stood in");
  p.sample("pto_runner_steps_reused_total", {}, static_cast<double>(m.steps_reused));
  p.family("pto_runner_card_seconds_saved_total", "counter", "Card-seconds the reused steps' results took when they ran");
  p.sample("pto_runner_card_seconds_saved_total", {}, m.card_seconds_saved);
  p.family("pto_runner_perf_samples_total", "counter", "Samples perf steps took (one execution of the step each)");
  p.sample("pto_runner_perf_samples_total", {}, static_cast<double>(m.perf_samples));
  p.family("pto_runner_perf_verdicts_total", "counter", "Perf steps judged, by metric and change (slower, faster, none; not_judged)");
  for (const auto& [k, n] : m.perf_verdicts)
    p.sample("pto_runner_perf_verdicts_total", {{"metric", k.first}, {"change", k.second.empty() ? "not_judged" : k.second}}, static_cast<double>(n));
  p.family("pto_runner_cache_bytes", "gauge", "What each named cache's tiers hold on disk (measured when retention prunes them)");
  for (const auto& [name, bytes] : m.cache_bytes) p.sample("pto_runner_cache_bytes", {{"cache", name}}, static_cast<double>(bytes));
  p.family("pto_runner_cache_hits_total", "counter", "Compiler calls of finished steps answered by a ccache cache");
  for (const auto& [name, n] : m.cache_hits) p.sample("pto_runner_cache_hits_total", {{"cache", name}}, static_cast<double>(n));
  p.family("pto_runner_cache_misses_total", "counter", "Compiler calls of finished steps a ccache cache could not answer");
  for (const auto& [name, n] : m.cache_misses) p.sample("pto_runner_cache_misses_total", {{"cache", name}}, static_cast<double>(n));
  p.family("pto_runner_tests_muted", "gauge", "Mutes in force (runner.yml tests.mute and the API's)");
  p.sample("pto_runner_tests_muted", {}, m.tests_muted);
  p.family("pto_runner_tests_flaky", "gauge", "Tests that failed and then passed on the same commit within tests.window-days");
  p.sample("pto_runner_tests_flaky", {}, m.tests_flaky);
  p.family("pto_runner_steps_ran_no_tests_total", "counter",
           "Steps with tests: that ran no tests, by branch (main: runner.yml main-branch; pull_request; other)");
  for (const auto& [branch, n] : m.ran_no_tests_by_branch) p.sample("pto_runner_steps_ran_no_tests_total", {{"branch", branch}}, static_cast<double>(n));
  if (!v.notify.empty()) {
    p.family("pto_runner_notify_pending", "gauge", "Notifications kept for a receiver and not yet delivered");
    for (const auto& r : v.notify) p.sample("pto_runner_notify_pending", {{"receiver", r.name}}, static_cast<double>(r.pending));
    p.family("pto_runner_notify_delivered_total", "counter", "Messages a receiver took, since the daemon started");
    for (const auto& r : v.notify) p.sample("pto_runner_notify_delivered_total", {{"receiver", r.name}}, static_cast<double>(r.delivered));
    p.family("pto_runner_notify_failures_total", "counter", "Failed deliveries to a receiver, since the daemon started");
    for (const auto& r : v.notify) p.sample("pto_runner_notify_failures_total", {{"receiver", r.name}}, static_cast<double>(r.failures));
    p.family("pto_runner_notify_dropped_total", "counter",
             "Notifications dropped unsent past a receiver's max-pending (the oldest first), since the daemon started");
    for (const auto& r : v.notify) p.sample("pto_runner_notify_dropped_total", {{"receiver", r.name}}, static_cast<double>(r.dropped));
    p.family("pto_runner_notify_failing", "gauge", "1 while a receiver's last delivery failed");
    for (const auto& r : v.notify) p.sample("pto_runner_notify_failing", {{"receiver", r.name}}, r.failing ? 1 : 0);
  }
  p.family("pto_runner_runs_total", "counter", "Finished runs by result since the daemon started");
  for (const auto& [r, n] : m.runs_by_result) p.sample("pto_runner_runs_total", {{"result", r}}, static_cast<double>(n));
  return p.text();
}

}  // namespace pto
