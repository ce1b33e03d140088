#pragma once
// StepLimits: pids-max, memory-max and cpu.max of one step (runner.yml sandbox.pids-max, memory-max; the
// step's own `cpus:` and `memory:`), in cgroups the
// daemon owns, so a step can neither raise them nor leave them. In the step's own cgroup v2 where the
// delegated tree has the pids and memory controllers (systemd's Delegate=yes); else in cgroups of the v1
// pids and memory hierarchies made for the step beside it (hosts that mount those beside a controller-less
// cgroup2, as the test machines here do). A limit is one the kernel enforces: fork fails past pids.max, the
// OOM killer ends the step past memory.max; exceeded() says which, afterwards, from the cgroups' event counters.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/byte_size.h"

namespace pto {

class StepLimits {
 public:
  struct Spec {
    std::uint64_t pids_max = 0;    // 0: none
    std::uint64_t memory_max = 0;  // bytes; 0: none
    /// The step's `cpus:`: cpu.max (v1: cpu.cfs_quota_us) of that many CPUs' time per period; 0: none.
    int cpus = 0;
    /// memory_max is the step's own `memory:` (what it asked the scheduler for), not sandbox.memory-max.
    bool memory_asked = false;
    bool any() const { return pids_max || memory_max || cpus; }
  };
  /// For a step whose cgroup v2 is `v2_cgroup` ("" without one). Never null; limits it could not place are
  /// said by unplaced().
  static std::unique_ptr<StepLimits> make(const Spec& spec, const std::string& v2_cgroup);
  ~StepLimits();  // removes the cgroups it made (once the step's processes are gone)

  /// Cgroup directories the step's first process joins besides its cgroup v2 (v1 pids, memory).
  const std::vector<std::string>& join() const { return join_; }
  /// The limits no controller here enforces ("" when all are placed), e.g. "memory-max (no memory controller)".
  const std::string& unplaced() const { return unplaced_; }
  /// What the step ran into, after it ended: "it reached pids-max (8192 processes): a fork was refused",
  /// "it reached memory-max (64 GiB): the OOM killer ended a process of it"; "" when nothing.
  std::string exceeded() const;
  /// Its caller saw every process of the step gone (its cgroup v2 empty): the v1 cgroups are recycled without
  /// reading their cgroup.procs.
  void processes_gone() { processes_gone_ = true; }

 private:
  StepLimits() = default;
  Spec spec_;
  std::string pids_dir_, memory_dir_, cpu_dir_;  // where each limit is (a v2 or v1 cgroup)
  bool pids_v1_ = false, memory_v1_ = false, cpu_v1_ = false;
  std::uint64_t pids_events_at_start_ = 0, oom_kills_at_start_ = 0;
  // As exceeded() read them at the step's end: handed on with the recycled cgroup (step_limits.cpp).
  mutable std::optional<std::uint64_t> pids_events_at_end_, oom_kills_at_end_;
  bool processes_gone_ = false;
  std::vector<std::string> join_, made_;
  std::string unplaced_;
};

}  // namespace pto
