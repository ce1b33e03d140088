#pragma once
// The host's step supervisor (`pto-runner supervise`, hidden): the process that starts and holds the daemon's
// steps, so they outlive the daemon (SPEC "Nothing lost when the daemon stops"), as slurmstepd holds Slurm's
// job steps and containerd-shim a container. One per state directory (its flock), started by the first daemon
// that needs it, in its own session; it outlives the daemon.
//
// It runs each step with the local executor (process group, cgroup, card-file grants, the log with its masks
// and caps, the time bounds, the sweep), keeps the step's card flocks open while the step runs (descriptors
// the daemon passed with the start, SCM_RIGHTS), and keeps each step's end until the daemon has read it (ack).
// It also keeps, for each active run, what the daemon must not write to disk but needs to go on with the run
// after a restart (its environment and secrets: `keep`/`forget`), in memory only.
//
// It also keeps copies of the daemon's listening sockets (the API's, the Unix socket's, the steps' endpoint's),
// so that no step can bind the daemon's address while the daemon restarts or after it crashed (SPEC "A step
// cannot take the daemon's place"); the next daemon listens on them.
//
// The wire (supervise/wire): the daemon sends start {id, launch}, cancel {id}, ack {id}, keep {run, data},
// forget {run}, keep_lease/forget_lease {id}, keep_listeners {names} (the sockets beside it), forget_listeners;
// the supervisor sends, on each connection, one `held` per step it holds (running ones with their flocks'
// descriptors; ended ones with their outcome), one `lease` per kept lease, `listeners` {names} (the sockets
// beside it) and `hello` {runs}; then `ended` {id, outcome, mask} as steps end. A newer connection replaces an
// older one (the older daemon is gone or going).
//
// The socket is `<dir>/sock` in a directory only root may enter: a step (another uid) can neither connect
// nor signal it. It exits when it holds nothing and no daemon is connected; with no daemon and only ended
// steps, after kLingerSeconds (their ends are then lost: the next daemon marks those runs interrupted).
#include <string>

namespace pto {

/// Runs the supervisor of `dir` until it has nothing left to hold. Returns the exit code (0; 1 when the
/// socket cannot be made). Another supervisor of `dir` already running: returns 0 at once.
int run_supervisor(const std::string& dir);

/// `<state dir>/supervisor`: where a daemon's supervisor lives.
std::string supervisor_dir(const std::string& state_dir);
std::string supervisor_socket(const std::string& dir);

constexpr double kSupervisorLingerSeconds = 3600;

}  // namespace pto
