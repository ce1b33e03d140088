#pragma once
// Descriptors kept open for the cgroup files every step reads or writes (cgroup.events at its end, the limits'
// event counters, the cgroup directory and cgroup.procs the spawner is given): a path walk through cgroupfs
// per step and file was the largest share of the runner's own system time per step (bench/README.md, "The
// spawner"). Cgroups are recycled (exec/cgroup_tree, exec/step_limits), so the same few paths come back.
// A cgroup removed is forgotten here first (CgroupTree::remove, StepLimits: every path that removes a cgroup
// pto-runner made), so what is kept is bounded by the cgroups that exist: nothing is closed under a caller
// that was handed a descriptor. A descriptor that stopped working is opened again once.
#include <string>

namespace pto::cgroup_files {

/// The file's whole text, read from offset 0 of its kept descriptor ("" when it cannot be read).
std::string read(const std::string& path);
/// A descriptor kept open for `path` with `flags` (O_CLOEXEC added), or -1 with errno: not the caller's to
/// close; valid until forget() of its directory.
int descriptor(const std::string& path, int flags);
/// The cgroup directory `dir` is being removed: the descriptors of it and of its files are closed.
void forget(const std::string& dir);

}  // namespace pto::cgroup_files
