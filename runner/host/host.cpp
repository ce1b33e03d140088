#include "host/host.h"
#include "supervise/supervisor.h"
#include "util/process_env.h"

#include <spdlog/spdlog.h>

#include "exec/cgroup_tree.h"
#include "slurm/slurm_command.h"
#include "slurm/slurm_executor.h"

namespace pto {

HostOptions HostOptions::daemon(const std::string& state_dir, bool simulate, bool supervise) {
  HostOptions ho;
  ho.simulate = simulate;
  ho.wait_for_drained = true;
  ho.watch_outside = true;
  ho.slurm_instance = slurm_instance_tag(state_dir);
  ho.cancel_slurm_leftovers = true;
  if (supervise) {
    ho.supervise_dir = supervisor_dir(state_dir);
    ho.self_exe = self_executable();
  }
  return ho;
}

std::unique_ptr<Host> wire_host(boost::asio::io_context& io, const RunnerConfig& cfg, const HostOptions& opts,
                                std::string& error) {
  auto h = std::make_unique<Host>();
  h->clock = make_steady_clock(io);
  h->pool = std::make_unique<DevicePool>(cfg, cfg.state_dir);
  if (error = h->pool->init(); !error.empty()) return nullptr;
  h->dispatcher = std::make_unique<Dispatcher>(io, *h->pool);
  h->dispatcher->set_wait_for_drained(opts.wait_for_drained);
  h->dispatcher->set_watch_outside_when_idle(opts.watch_outside);
  const HostBudget budget = host_budget(cfg.host);
  h->dispatcher->set_host_budget(budget.cpus, budget.memory);
  // Before the first step: containment is decided once per process.
  if (cfg.containment == Containment::Sweep) CgroupTree::disable("runner.yml containment: sweep");
  // Only where every step is in a cgroup it cannot leave is nothing of a step left to hold a card we let go.
  h->pool->set_scan_at_hand_over(!CgroupTree::instance().available());
  h->reaper = std::make_unique<OrphanReaper>(io);  // what steps orphan is reparented here and reaped
  if (cfg.executor == ExecutorKind::Slurm && !opts.simulate) {
    // Slurm must answer before anything is accepted: a daemon that cannot reach it would only fail steps.
    SlurmCommandResult ping = run_slurm_command({"sinfo", "--json"}, 30);
    if (!ping.ok()) {
      error = "executor: slurm, but Slurm does not answer (sinfo --json: " + ping.why() + ")";
      return nullptr;
    }
    h->slurm = std::make_unique<SlurmCluster>(io, cfg, opts.slurm_instance);
    // With a step supervisor, srun (and steps without cards) run under it and outlive this process: what an
    // earlier daemon left is cancelled only once this one has taken over what it can (cancel_slurm_leftovers).
    std::unique_ptr<Executor> inner;
    if (!opts.supervise_dir.empty()) {
      auto supervised = SupervisedExecutor::connect(io, opts.supervise_dir, opts.self_exe, cfg.containment == Containment::Sweep, error);
      if (!supervised) return nullptr;
      h->supervised = supervised.get();
      inner = std::move(supervised);
    } else {
      inner = make_local_executor(io);
      if (opts.cancel_slurm_leftovers) h->cancel_slurm_leftovers({});
    }
    h->slurm_broker = std::make_unique<SlurmBroker>(io, *h->slurm);
    h->executor = make_slurm_executor(io, *h->slurm, std::move(inner));
    return h;
  }
  if (!opts.simulate && !opts.supervise_dir.empty()) {
    auto supervised = SupervisedExecutor::connect(io, opts.supervise_dir, opts.self_exe, cfg.containment == Containment::Sweep, error);
    if (!supervised) return nullptr;
    h->supervised = supervised.get();
    h->executor = std::move(supervised);
    return h;
  }
  h->executor = opts.simulate ? make_simulated_executor(io) : make_local_executor(io);
  if (opts.simulate && !opts.simulate_lead) h->lead_executor = make_local_executor(io);
  return h;
}

void Host::cancel_slurm_leftovers(const std::set<std::string>& keep) {
  if (!slurm) return;
  for (const auto& said : slurm->cancel_leftovers(keep)) spdlog::warn("slurm: {}", said);
}

std::uint64_t Host::adopt_step(const StepLaunch& what, const Placement& where, std::shared_ptr<SecretMask> mask,
                               std::function<void(const StepOutcome&)> done, HeldStep& taken) {
  if (!supervised) return 0;
  ReattachInner reattach = [&](std::function<void(const StepOutcome&)> inner_done, std::function<bool(std::string_view)> take_line) {
    return supervised->adopt(what.marker, std::move(inner_done), taken, mask, std::move(take_line));
  };
  if (slurm) return adopt_slurm_step(*executor, what, where, reattach, std::move(done));
  return reattach(std::move(done), nullptr);
}

}  // namespace pto
