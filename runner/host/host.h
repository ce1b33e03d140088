#pragma once
// One place that wires a host from its settings, for `run`, `serve` and the tests: the cards (DevicePool and
// their flocks), the card broker that hands them out (the local Dispatcher, or with runner.yml `executor:
// slurm` the Slurm broker, where Slurm is the queue), containment (cgroups or the sweep), the orphan reaper,
// and the executors (local, Slurm, or simulated with the lead job still real).
#include <memory>
#include <string>

#include "config/runner_config.h"
#include "engine/dispatcher.h"
#include "exec/child_reaper.h"
#include "exec/executor.h"
#include "sched/device_pool.h"
#include "slurm/slurm_broker.h"
#include "slurm/slurm_cluster.h"
#include "util/clock.h"

namespace boost::asio {
class io_context;
}

namespace pto {

struct HostOptions {
  bool simulate = false;        // steps sleep their expected time
  bool simulate_lead = false;   // with simulate: the lead job sleeps too (else it runs for real)
  bool wait_for_drained = false;  // a daemon: steps only drained cards could serve wait for them
  /// executor: slurm — the tag of this process's Slurm jobs, and whether to cancel what an earlier process
  /// with the same tag left (a daemon, which holds its state directory).
  std::string slurm_instance;
  bool cancel_slurm_leftovers = false;
};

struct Host {
  std::unique_ptr<Clock> clock;  // the engines' (steady time, timers on the io_context)
  std::unique_ptr<DevicePool> pool;
  std::unique_ptr<Dispatcher> dispatcher;  // the local card broker
  std::unique_ptr<OrphanReaper> reaper;
  std::unique_ptr<SlurmCluster> slurm;             // executor: slurm (else null); before the executor using it
  std::unique_ptr<SlurmBroker> slurm_broker;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Executor> lead_executor;  // only under simulate without simulate_lead; else null
  /// What steps ask for cards: Slurm's broker with `executor: slurm`, else this host's dispatcher.
  CardBroker& broker() { return slurm_broker ? static_cast<CardBroker&>(*slurm_broker) : *dispatcher; }
};

/// Wires the host described by `cfg` (directories already resolved). Returns null with `error` set when the
/// cards cannot be used (the lock directory) or Slurm cannot be reached.
std::unique_ptr<Host> wire_host(boost::asio::io_context& io, const RunnerConfig& cfg, const HostOptions& opts,
                                std::string& error);

}  // namespace pto
