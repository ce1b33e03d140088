#pragma once
// Containment by cgroup v2, where the host allows it: every step (and health check, git or pip run) gets its
// own cgroup under <this process's cgroup>/pto-runner-<pid>. A step is over when its cgroup is empty;
// `cgroup.kill` ends every process in it, including those that left its process group with setsid() and
// scrubbed their environment (which the process-group kill and the /proc marker sweep cannot find).
//
// Found through /proc/self/mountinfo (a cgroup2 mount, possibly beside v1 hierarchies) and /proc/self/cgroup
// (the "0::" line). Where no writable cgroup2 with cgroup.kill exists (no permission, an old kernel, a
// cgroup v1-only host), available() is false and the executor keeps its process group + marker sweep.
// Under systemd, the unit needs Delegate=yes so the daemon may create cgroups below its own.
#include <sys/types.h>

#include <mutex>
#include <string>
#include <vector>

namespace pto {

/// A cgroupfs file whole ("" when it cannot be read), and one written in a single write (false on failure).
std::string read_cgroup_file(const std::string& path);
bool write_cgroup_file(const std::string& path, const std::string& text);

class CgroupTree {
 public:
  /// The process-wide tree (made on first use, removed at exit).
  static CgroupTree& instance();
  /// runner.yml `containment: sweep`: never use cgroups (before the first instance()).
  static void disable(const std::string& why);
  bool available() const { return !root_.empty(); }
  /// Why not, when not available.
  const std::string& why_not() const { return why_not_; }
  const std::string& root() const { return root_; }

  /// An empty cgroup for one step or lease, in this tree or under `parent` (a step supervisor's tree, where a
  /// lease's command outlives this process), named `kind`-N when made; "" when none can be made. A cgroup
  /// given back with recycle() is handed out again under the same parent: the first process to enter a freshly
  /// made cgroup pays ~1 ms in the kernel (bench/README.md, release latency), one that entered a used cgroup
  /// 0.07 ms.
  std::string make_child(const std::string& parent = "", const char* kind = "step");
  /// A step's cgroup, its step over: kept for the next step when it is empty (a bounded number of them),
  /// removed otherwise. Only for cgroups nobody outside can still join: a lease's cgroup only once its client
  /// released it itself (it starts one command); a revoked lease's client might still start its command: remove().
  /// `known_empty`: its caller has just seen it empty (cgroup.events is not read again).
  void recycle(const std::string& cgroup, bool known_empty = false);
  static bool add_process(const std::string& cgroup, pid_t pid);
  static std::vector<pid_t> processes(const std::string& cgroup);
  static bool populated(const std::string& cgroup);
  /// Sends `sig` to every process in the cgroup (SIGKILL goes through cgroup.kill, which also catches forks).
  static int signal_all(const std::string& cgroup, int sig);
  static void remove(const std::string& cgroup);

  ~CgroupTree();

 private:
  CgroupTree();
  std::string root_, why_not_;
  std::mutex spare_lock_;
  std::vector<std::string> spare_;  // empty cgroups of finished steps and leases, handed out again by make_child()
};

}  // namespace pto
