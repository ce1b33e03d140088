#pragma once
// One place that wires a host from its settings, for `run`, `serve` and the tests: the cards (DevicePool and
// their flocks), the card broker that hands them out (the local Dispatcher, or with runner.yml `executor:
// slurm` the Slurm broker, where Slurm is the queue), containment (cgroups or the sweep), the orphan reaper,
// the executors (local, Slurm, or simulated with the lead job still real) and the engines' clock.
//
// Above the wiring, Host is the one face of the cards for the daemon and the API's commands, the same for
// local cards and for Slurm (host/host_cards.cpp): drains, card ids, what the read model shows of cards and
// nodes, a reload, and what a lease needs of the executor. Nothing above it names the pool or Slurm.
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "host/dispatcher.h"
#include "exec/child_reaper.h"
#include "exec/executor.h"
#include "sched/device_pool.h"
#include "slurm/slurm_broker.h"
#include "slurm/slurm_cluster.h"
#include "supervise/supervised_executor.h"
#include "util/answer.h"
#include "util/clock.h"
#include "read_model/host_view.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class CardProber;

struct HostOptions {
  bool simulate = false;        // steps sleep their expected time
  bool simulate_lead = false;   // with simulate: the lead job sleeps too (else it runs for real)
  bool wait_for_drained = false;  // a daemon: steps only drained cards could serve wait for them
  bool watch_outside = false;     // a daemon: cards another program uses are re-checked while idle too
  /// executor: slurm — the tag of this process's Slurm jobs, and whether to cancel what an earlier process
  /// with the same tag left (a daemon, which holds its state directory).
  std::string slurm_instance;
  bool cancel_slurm_leftovers = false;
  /// A daemon: its steps are held by the host's supervisor in this directory (supervise/), started with
  /// `self_exe`; "" runs them as this process's children (`run`, the simulator, `supervise: false`).
  std::string supervise_dir;
  std::string self_exe;
  /// A daemon's host, holding `state_dir`: drained cards may return (steps wait for them, where `run` fails
  /// fast), a card another program used shows free as soon as it is, what its Slurm tag left is its own, and
  /// with `supervise` its steps (under Slurm, srun, whose end is the step's) outlive it.
  static HostOptions daemon(const std::string& state_dir, bool simulate, bool supervise);
};

struct Host {
  std::unique_ptr<Clock> clock;  // the engines' (steady time, timers on the io_context)
  std::unique_ptr<DevicePool> pool;
  std::unique_ptr<Dispatcher> dispatcher;  // the local card broker
  std::unique_ptr<OrphanReaper> reaper;
  std::unique_ptr<SlurmCluster> slurm;             // executor: slurm (else null); before the executor using it
  std::unique_ptr<SlurmBroker> slurm_broker;
  std::unique_ptr<Executor> executor;
  SupervisedExecutor* supervised = nullptr;  // the executor, when the supervisor holds the steps
  std::unique_ptr<Executor> lead_executor;  // only under simulate without simulate_lead; else null
  std::unique_ptr<CardProber> prober;       // with health.check: bad cards probed back into service (start_prober)
  Host();
  ~Host();
  /// What steps ask for cards: Slurm's broker with `executor: slurm`, else this host's dispatcher.
  CardBroker& broker() { return slurm_broker ? static_cast<CardBroker&>(*slurm_broker) : *dispatcher; }

  // --- the face (host/host_cards.cpp) ---
  /// True when the cluster (Slurm) picks the cards: no card ids in requests, nodes rather than cards drained.
  bool cluster_picks_cards() const { return slurm != nullptr; }
  bool has_card(int id) const;
  /// An operator (`by`) drains card `card` (with `reason`) or returns it to service: logged, and answered as the
  /// API answers it (404 no such card, 409 under Slurm).
  Answer change_card(int card, bool drain, const std::string& reason, const std::string& by);
  /// An operator drains a Slurm node or resumes it (blocking, at most 10 s: an operator's rare action): 409
  /// without Slurm, 400 refused by Slurm, 503 Slurm not answering.
  Answer change_node(const std::string& node, bool drain, const std::string& reason, const std::string& by);
  /// With `health.check` on the host's own cards: a bad card comes back after passing probes (host/card_prober),
  /// each probe told to `probed` (card, command, seconds, failure or ""), a return to `returned` (after which
  /// waiting steps are offered it). Nothing without a check or under Slurm.
  void start_prober(boost::asio::io_context& io, const HealthConfig& health, const std::string& log_dir,
                    std::function<void(int card, const std::string& command, double seconds, const std::string& failure)> probed,
                    std::function<void(int card)> returned);
  /// SIGHUP: new cards, groups, types, drain policy, the health check. What changed, one line each.
  std::vector<std::string> reconfigure(const RunnerConfig& next);
  /// Called when the queue, the cards or the cluster changed (for the read model).
  void set_on_change(std::function<void()> f);
  /// Fills the read model's cards (or nodes), usable count and executor name.
  void describe(HostView& view, const HostOccupancy& who) const;
  /// What a granted lease's client runs its command through: Slurm's srun line (`label` shown there, the wait
  /// and run limits counted by Slurm), or nothing for local cards.
  std::vector<std::string> lease_command_prefix(const std::string& marker, const std::string& run, const std::string& label,
                                                int devices, const std::string& type, double max_seconds,
                                                double wait_seconds) const;
  /// A granted lease ended, however: under Slurm its job ends with it.
  void lease_ended(const std::string& marker);
  /// A step an earlier daemon started, held meanwhile by the step supervisor, followed again by this host's
  /// executor (under Slurm its job too, `where`): `done` once it ends; 0 when nothing holds it. What was held
  /// of it (its cards' flocks, its lease token) goes to `taken`.
  std::uint64_t adopt_step(const StepLaunch& what, const Placement& where, std::shared_ptr<SecretMask> mask,
                           std::function<void(const StepOutcome&)> done, HeldStep& taken);
  /// executor: slurm — cancels the jobs an earlier daemon of this state dir left, but those named in `keep`
  /// (job names: slurm/slurm_command job_name_of, of the steps this daemon took over).
  void cancel_slurm_leftovers(const std::set<std::string>& keep);
};

/// Wires the host described by `cfg` (directories already resolved). Returns null with `error` set when the
/// cards cannot be used (the lock directory) or Slurm cannot be reached.
std::unique_ptr<Host> wire_host(boost::asio::io_context& io, const RunnerConfig& cfg, const HostOptions& opts,
                                std::string& error);

}  // namespace pto
