#pragma once
// What a sandbox user leaves behind when its run ends, and its removal before the user is lent again (as
// Nix's build users and logind's RemoveIPC=yes): every process still running as it, its SysV shared memory,
// semaphore sets and message queues, its POSIX message queues, and what it owns in every world-writable
// directory of the host (/tmp, /var/tmp, /dev/shm, /run/lock, and any other found at the first sweep, with the
// world-writable directories inside them). The next run lent the user finds nothing of this one.
#include <sys/types.h>

#include <string>
#include <vector>

namespace pto {

struct Leftovers {
  int processes = 0, ipc = 0, files = 0;
  /// "3 process(es) of NAME killed, 2 IPC object(s) and 5 file(s) removed", "" when nothing.
  std::string text(const std::string& user) const;
};

/// Removes everything of `uid` (never root's) as above.
Leftovers sweep_leftovers_of(uid_t uid);

/// Kills (SIGKILL) every process whose real, effective or saved uid is `uid`, until none is left (at most ~2 s);
/// how many there were.
int kill_processes_of(uid_t uid);
/// Removes the SysV IPC objects (shm, sem, msg: owner or creator `uid`) and POSIX message queues of `uid`.
int remove_ipc_of(uid_t uid);
/// Removes what `uid` owns in the world-writable directories (links themselves, never their targets); how many.
int remove_files_of(uid_t uid);
/// The world-writable directories a sweep looks in: the usual ones and those found once on the host (to a
/// depth of 3 under /, not /proc or /sys).
const std::vector<std::string>& world_writable_dirs();

}  // namespace pto
