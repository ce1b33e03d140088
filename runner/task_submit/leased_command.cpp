#include "task_submit/leased_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "exec/process_sweep.h"
#include "exec/spawn_process.h"
#include "slurm/srun_env.h"
#include "util/process_env.h"
#include "util/clock.h"

extern char** environ;

namespace pto {

namespace {

// A program as found on PATH (commands are spawned without a PATH search).
std::string on_path(const std::string& name, const std::string& fallback) {
  std::string found = find_on_path(name);
  return found.empty() ? fallback : found;
}

}  // namespace

// A cgroup this user may not enter is not an error: the group and the marker still reach what did not escape.
// Under Slurm the command runs in a Slurm job on the node with the cards, through srun, whose environment
// loses what srun itself reads.
pid_t spawn_command(const std::string& command, const std::vector<std::string>& extra_env, const std::string& cgroup,
                    const std::vector<std::string>& srun_argv) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    bool replaced = false;
    for (const auto& x : extra_env) replaced |= kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!replaced && !(!srun_argv.empty() && srun_reads(kv))) env.push_back(kv);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> argv = {on_path("bash", "/bin/bash"), "-c", command};
  if (!srun_argv.empty()) {
    argv = srun_argv;
    argv[0] = on_path(argv[0], argv[0]);
    argv.insert(argv.end(), {"/bin/bash", "-c", command});
  }
  SpawnSpec spec{std::move(argv), std::move(env), "", -1, cgroup};
  spec.fork_into_cgroup = true;  // a small process: forked into the lease's cgroup, not moved there
  int error = 0;
  pid_t pid = spawn_process(spec, error);
  if (pid < 0 && !cgroup.empty()) {
    spec.cgroup.clear();
    pid = spawn_process(spec, error);
  }
  return pid;
}

int stop_command(pid_t pid, const std::string& marker, double grace) {
  using Clock = std::chrono::steady_clock;
  ::kill(-pid, SIGTERM);
  int status = 0;
  auto until = steady_now() + std::chrono::duration<double>(grace);
  while (steady_now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  kill_marked_processes(marker, SIGKILL);
  return status;
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace pto
