// Host's face (host/host.h): the cards as the daemon and the API's commands see them, whether this host's
// own (DevicePool, Dispatcher) or Slurm's (SlurmCluster). The only place above the wiring that names either.
#include "host/host.h"

#include "util/byte_size.h"

#include <spdlog/spdlog.h>

#include "exec/process_marker.h"
#include "host/card_prober.h"
#include "slurm/slurm_command.h"
#include "slurm/slurm_executor.h"

namespace pto {

bool Host::has_card(int id) const { return !slurm && pool->has_card(id); }

Answer Host::change_card(int card, bool drain, const std::string& reason, const std::string& by) {
  if (slurm)
    return Answer::error(Outcome::Conflict, "under executor: slurm the cards are Slurm's, and Slurm drains nodes: "
                                            "POST /api/v1/nodes/NODE/drain (pto-runner devices --drain-node NODE)");
  if (!pool->has_card(card)) return Answer::error(Outcome::NotFound, "no card " + std::to_string(card));
  if (drain) {
    pool->drain(card, reason);
    spdlog::warn("card {} drained by request from {}: {}", card, by, reason);
    return {Outcome::Ok, {{"card", card}, {"state", "drained"}, {"reason", reason}}};
  }
  const bool changed = pool->undrain(card);
  dispatcher->poke();  // a step may have waited for it
  spdlog::info("card {} returned to service by request from {}", card, by);
  return {Outcome::Ok, {{"card", card}, {"state", "free"}, {"changed", changed}}};
}

Answer Host::change_node(const std::string& node, bool drain, const std::string& reason, const std::string& by) {
  if (!slurm)
    return Answer::error(Outcome::Conflict, "nodes are Slurm's: this daemon runs executor: local; drain a card with /api/v1/devices/ID/drain");
  SlurmCommandResult r = slurm->set_node_drained(node, drain, reason);
  // Refused by Slurm (an unknown node, a bad state) is the request's fault; Slurm not answering is the host's.
  if (!r.ok()) return Answer::error(r.error.empty() ? Outcome::BadRequest : Outcome::Unavailable, "scontrol: " + r.why());
  spdlog::warn("Slurm node {} {} by request from {}{}", node, drain ? "drained" : "resumed", by, drain ? ": " + reason : "");
  return {Outcome::Ok, {{"node", node}, {"state", drain ? "drain" : "resume"}, {"reason", drain ? reason : ""}}};
}

Host::Host() = default;
Host::~Host() = default;

void Host::start_prober(boost::asio::io_context& io, const HealthConfig& health, const std::string& log_dir,
                        std::function<void(int, const std::string&, double, const std::string&)> probed,
                        std::function<void(int)> returned) {
  if (health.check.empty() || cluster_picks_cards()) return;
  prober = std::make_unique<CardProber>(io, *pool, *executor, health, log_dir, std::move(probed),
                                        [this, returned = std::move(returned)](int card) {
                                          returned(card);
                                          dispatcher->poke();
                                        });
  prober->start();
}

std::vector<std::string> Host::reconfigure(const RunnerConfig& next) {
  if (prober) prober->set_health(next.health);
  std::vector<std::string> changes = pool->reconfigure(next);
  const HostBudget before{dispatcher->host_use().cpus, dispatcher->host_use().memory}, after = host_budget(next.host);
  if (before.cpus != after.cpus || before.memory != after.memory) {
    dispatcher->set_host_budget(after.cpus, after.memory);
    changes.push_back("host: " + host_share_words(after.cpus, after.memory) + " (was " + host_share_words(before.cpus, before.memory) + ")");
  }
  dispatcher->poke();
  return changes;
}

void Host::set_on_change(std::function<void()> f) {
  dispatcher->set_on_change(f);
  if (slurm) slurm->set_on_change(std::move(f));
}

void Host::describe(HostView& v, const HostOccupancy& who) const {
  v.cards.clear();
  v.nodes.clear();
  v.usable_cards = 0;
  if (!slurm) {
    v.executor = ExecutorKind::Local;
    const Dispatcher::HostUse use = dispatcher->host_use();
    v.cpus = use.cpus, v.cpus_in_use = use.cpus_in_use, v.memory = use.memory, v.memory_in_use = use.memory_in_use;
    const auto& reserved = dispatcher->reserved();
    for (const auto& c : pool->status(reserved)) {
      CardView cv;
      cv.id = c.id;
      cv.state = to_string(c.state);
      cv.type = c.type;
      cv.group = c.group;
      cv.since = c.since;
      cv.drain_reason = c.drain_reason;
      cv.health = to_string(c.health);
      cv.evidence = c.evidence;
      cv.consecutive_infra_failures = c.consecutive_infra_failures;
      cv.busy_seconds = c.busy_seconds;
      v.usable_cards += c.state != CardState::Drained;
      if (!c.holder.empty()) {
        HolderView h;
        h.other_program = c.held_outside;
        // Used by a program pto-runner does not run (the incumbent task-submit, a person's script): the pool says
        // which and how (its lock file's holder line, or the process with the card's file open).
        h.label = c.holder;
        h.since = c.held_since;
        if (auto it = who.on_card.find(c.id); it != who.on_card.end() && !c.held_outside) {
          h.run = it->second.run;
          h.step = it->second.step;
          h.estimate = it->second.estimate;
          h.log_url = it->second.log_url;
        } else if (auto l = who.lease_run_of_card.find(c.id); l != who.lease_run_of_card.end() && !l->second.empty()) {
          h.run = l->second;
        }
        cv.holder = std::move(h);
      }
      if (auto it = reserved.find(c.id); it != reserved.end() && c.state == CardState::Reserved)
        if (auto p = who.position_of_ticket.find(it->second); p != who.position_of_ticket.end()) cv.reserved_for_position = p->second;
      v.cards.push_back(std::move(cv));
    }
    return;
  }
  v.executor = ExecutorKind::Slurm;
  v.slurm_problem = slurm->problem();
  for (const auto& n : slurm->nodes()) {
    NodeView nv;
    nv.name = n.name;
    nv.state = n.state;
    nv.reason = n.reason;
    nv.features = n.features;
    nv.drained = n.drained();
    for (const auto& [type, count] : n.total) nv.cards += count;
    for (const auto& [type, count] : n.used) nv.cards_used += count;
    if (!nv.drained) v.usable_cards += nv.cards;
    v.nodes.push_back(std::move(nv));
  }
  // The node a step runs on, also one the last snapshot did not list (yet).
  auto node_named = [&v](const std::string& name) -> NodeView& {
    for (auto& n : v.nodes)
      if (n.name == name) return n;
    v.nodes.push_back({});
    v.nodes.back().name = name;
    v.nodes.back().state = "unknown";
    return v.nodes.back();
  };
  // Leases' commands running in Slurm (task-submit under executor: slurm), as Slurm shows them; their job is
  // named after the lease's marker.
  for (const auto& j : slurm->jobs()) {
    auto marker = ProcessMarker::parse(marker_of_job(j.name));
    if (j.pending() || j.node.empty() || !marker || marker->kind != ProcessMarker::Kind::Lease) continue;
    SlurmStepView sv;
    sv.job = j.id;
    sv.label = marker->lease;
    sv.run = marker->run;
    sv.cards = j.cards;
    node_named(j.node).steps.push_back(std::move(sv));
  }
  // Where each placed step of ours runs, from the engines' records (exact: what the step's wrapper said).
  for (const auto& u : who.placed) {
    SlurmStepView sv;
    sv.job = u.executor_job;
    sv.label = u.label;
    sv.run = u.run;
    sv.step = u.step;
    sv.log_url = u.log_url;
    sv.cards = u.cards;
    node_named(u.node).steps.push_back(std::move(sv));
  }
}

std::vector<std::string> Host::lease_command_prefix(const std::string& marker, const std::string& run, const std::string& label,
                                                    int devices, const std::string& type, double max_seconds,
                                                    double wait_seconds) const {
  if (!slurm) return {};
  // Slurm is the queue: the client runs its command through this srun (a job named after the lease), and the
  // wrapper in the job sets TASK_DEVICE from the cards Slurm allocated.
  return slurm_lease_argv(*slurm, marker, run, label, devices, type, max_seconds, wait_seconds);
}

void Host::lease_ended(const std::string& marker) {
  // A lease's command is a Slurm job named after it: it ends with the lease, however it ends.
  if (slurm) slurm->command({"scancel", "--me", "--name=" + job_name_of(marker)});
}

}  // namespace pto
