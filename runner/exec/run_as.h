#pragma once
// RunAs: the unprivileged user a process is started as (a run's sandbox user, sandbox/sandbox_pool), with
// its primary group and supplementary groups. The child drops to it after joining its cgroup and before
// its first instruction (exec/spawn_process), with no_new_privs set, so nothing it runs can regain more.
#include <sys/types.h>

#include <string>
#include <vector>

namespace pto {

struct RunAs {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

}  // namespace pto
