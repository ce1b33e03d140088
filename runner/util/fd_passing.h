#pragma once
// File descriptors beside a Unix socket message (SCM_RIGHTS): both wires that carry them use these, the
// supervisor's (supervise/wire) and the spawner's (exec/spawn_wire). No dependencies: pto-spawner links it.
#include <sys/socket.h>

#include <vector>

namespace pto {

/// Sets `msg`'s control data to carry `fds` (none: no control data); `control` holds it until sendmsg.
void attach_fds(msghdr& msg, std::vector<char>& control, const std::vector<int>& fds);
/// Appends the descriptors a received `msg` carried to `out` (the caller owns them).
void collect_fds(msghdr& msg, std::vector<int>& out);

}  // namespace pto
