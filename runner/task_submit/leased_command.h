#pragma once
// The command task-submit runs under a lease (or without one, --no-device): started in its own process group
// with the lease's cards and marker in its environment, inside the lease's cgroup where the daemon made one,
// and stopped as a step is (SIGTERM to the group, SIGKILL after the grace, then whatever escaped carrying the
// marker). Under executor: slurm it runs through the srun line the daemon answered with.
#include <sys/types.h>

#include <string>
#include <vector>

namespace pto {

/// A command started for task-submit: its pid (< 0 when bash could not be started).
pid_t spawn_command(const std::string& command, const std::vector<std::string>& extra_env, const std::string& cgroup = "",
                    const std::vector<std::string>& srun_argv = {});
/// SIGTERM to the group, SIGKILL after `grace` seconds, then the marked escapees. Returns the wait status.
int stop_command(pid_t pid, const std::string& marker, double grace);
/// The exit code task-submit reports for a wait status: the command's own, or 128 + its signal.
int exit_code_of(int wait_status);

}  // namespace pto
