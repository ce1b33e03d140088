#pragma once
// Starting a process the way pto-runner starts every step and every leased command: its own process group,
// default signal dispositions, an empty signal mask and, where a cgroup is given, inside that cgroup from
// before its first instruction. Used by the local executor (steps, health checks) and by the task-submit
// client (a lease's command joins the cgroup the daemon made for the lease).
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "exec/run_as.h"

namespace pto {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is a path: no PATH search
  std::vector<std::string> env;   // the whole environment
  std::string cwd;                // "" keeps the caller's
  int out_fd = -1;                // stdout and stderr (stdin from /dev/null, fds >= 3 closed); -1 inherits stdio
  std::string cgroup;             // a cgroup v2 directory to enter before exec; "" for none
  std::vector<std::string> also_join;  // more cgroup directories to enter (v1 pids, memory: exec/step_limits)
  /// The caller is the task-submit client: the child starts straight in the cgroup (clone3 with
  /// CLONE_INTO_CGROUP, vfork semantics) instead of being moved there. Moving a process between cgroups takes
  /// the kernel's cgroup threadgroup lock for writing, which waits for an RCU grace period when no migration
  /// happened just before: 10-25 ms for a client that starts one command, the cost of a lease's grant
  /// (bench/README.md, task-submit). The daemon migrates often enough to keep that lock warm and moves its
  /// children. Vfork semantics need glibc's private clone3 wrapper, which only a static link has: elsewhere
  /// the child is cloned with fork semantics (copying the caller's page tables: cheap for a small process).
  bool fork_into_cgroup = false;
  /// The user it runs as (a run's sandbox user): dropped to after entering the cgroup and before chdir and
  /// exec, with no_new_privs (no setuid program gives anything back). Needs root.
  std::optional<RunAs> run_as;
  /// RLIMIT_NPROC for it (0: unchanged): with a uid of its own per run, a cap on the run's processes where the
  /// cgroup has no pids controller.
  unsigned long max_processes = 0;
};

/// The child's pid, or -1 with `error` (an errno) when it could not be started (also when the cgroup could
/// not be entered: nothing of it ran outside).
pid_t spawn_process(const SpawnSpec& spec, int& error);

/// What a freshly forked child needs to become a step, all made before the fork (a vfork child may only make
/// system calls): used by spawn_process's vfork path and by the spawner process (exec/spawner_main).
struct StepChild {
  char* const* argv = nullptr;  // argv[0] is a path
  char* const* envp = nullptr;
  const char* cwd = "";         // "" keeps the parent's
  int out_fd = -1;              // stdout and stderr (stdin from null_fd, fds >= 3 closed at exec); -1 inherits
  int null_fd = -1;
  int procs_fd = -1;            // a cgroup.procs to write its pid into (-1: already in its cgroup, or none)
  const int* also_fds = nullptr;  // `tasks` of v1 hierarchies' cgroups (pids, memory) it moves itself into
  std::size_t also_count = 0;
  bool drop = false;            // to uid/gid/groups, with no_new_privs
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  std::size_t group_count = 0;
  unsigned long max_processes = 0;  // RLIMIT_NPROC, 0: unchanged
};

/// `strings` as execve takes them: their characters (which must outlive the array), then a null.
std::vector<char*> exec_strings(const std::vector<std::string>& strings);

/// In the child: default signal dispositions, its cgroups, a process group of its own, its limit, its user,
/// its descriptors, its directory, an empty signal mask, then exec. Returns only when something failed: the
/// errno (the caller reports it and _exits).
int become_step(const StepChild& child);

}  // namespace pto
