#pragma once
// The one way pto-runner opens a lock file (cards, the daemon's state dir, the mirror, the toolchain cache,
// the sandbox users): made 0600, never through a link, a regular file of root's or ours. Whoever can open a
// lock file can flock it and hold it, and a sandbox user holding the daemon's lock would keep the next daemon
// from starting (SPEC "A shared host under attack").
#include <string>

namespace pto {

/// Opens (making it, 0600) a lock file without following a link: a regular file of root's or ours, closed to
/// others (one made before and open to others is closed now). -1 with `error` naming it as `what`.
int open_private_lock_file(const std::string& path, const std::string& what, std::string& error);

}  // namespace pto
