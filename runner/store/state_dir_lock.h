#pragma once
// One daemon per state dir: `serve` holds an exclusive flock on <state-dir>/daemon.lock (with its pid written in
// it) for as long as it runs. Other commands that would change the state dir behind its back (`devices --drain`
// without --server) ask who holds it and refuse.
#include <string>

namespace pto {

/// Takes the lock for this process. Returns the open descriptor (keep it open), or -1 with `holder` set to the
/// pid that holds it ("unknown" if unreadable) or `error` set when the file cannot be opened.
int lock_state_dir(const std::string& state_dir, std::string& holder, std::string& error);

/// The pid of the daemon holding the state dir, or "" when none does.
std::string state_dir_holder(const std::string& state_dir);

}  // namespace pto
