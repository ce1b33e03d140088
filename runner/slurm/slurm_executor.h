#pragma once
// The Slurm executor: each device step is one Slurm job, `srun` run here under the local executor (so its
// output comes back through srun into the same per-step log, with the same cap, console and log API). Slurm
// picks the node and the cards; a small wrapper inside the job reads the GRES indices Slurm allocated
// (`scontrol show job -d`), exports TASK_DEVICE/DEVICE_ID, tells the executor where it runs with one line the
// log never shows, and execs the step's shell. Timeout and cancel are `scancel` (SIGTERM to the job's steps,
// SIGKILL and cancel after the grace period). Steps with no cards run on this host (the local executor).
#include <functional>
#include <memory>
#include <string_view>

#include "exec/executor.h"
#include "slurm/slurm_cluster.h"

namespace pto {

std::unique_ptr<Executor> make_slurm_executor(boost::asio::io_context& io, SlurmCluster& cluster,
                                              std::unique_ptr<Executor> local);

/// How the step supervisor's hold of a step is taken back (supervise/supervised_executor adopt): the inner
/// handle, 0 when nothing holds it.
using ReattachInner = std::function<std::uint64_t(std::function<void(const StepOutcome&)> done, std::function<bool(std::string_view)> take_line)>;

/// A step an earlier daemon started under `slurm` (make_slurm_executor's) and the step supervisor held meanwhile
/// (its srun, or its process when it had no cards), followed again: its Slurm job `where.job` watched, its
/// cancel through scancel; `what` says its marker, label, log and grace. Its handle, 0 when nothing holds it.
std::uint64_t adopt_slurm_step(Executor& slurm, const StepLaunch& what, const Placement& where, const ReattachInner& reattach,
                               std::function<void(const StepOutcome&)> done);

/// The srun command line of a step (exposed for tests): `group_type` is the GRES type of the card group a
/// multi-card step asks for ("" = untyped).
std::vector<std::string> slurm_step_argv(const SlurmConfig& cfg, const StepLaunch& launch, const std::string& name,
                                         const std::string& comment, const std::string& group_type,
                                         const std::string& nonce);

/// A lease (task-submit) of `devices` cards under executor: slurm: the srun command line its client runs its
/// command with (append `/bin/bash -c COMMAND`). The job is named after the lease's marker, so ending the
/// lease can end it (`scancel --name`); inside it TASK_DEVICE is set and `{}` in the command replaced as the
/// local client does. `max_seconds` (--max-time) counts from the command's start in the job (exit 137), and
/// `wait_seconds` (--timeout) bounds the wait in Slurm's queue (`srun --immediate`, exit 1).
std::vector<std::string> slurm_lease_argv(const SlurmCluster& cluster, const std::string& marker, const std::string& run,
                                          const std::string& label, int devices, const std::string& device_type,
                                          double max_seconds, double wait_seconds);

}  // namespace pto
