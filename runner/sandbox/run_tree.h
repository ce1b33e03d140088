#pragma once
// Who owns what in the state dir, as the SPEC's "A step cannot touch the daemon, the host or another run"
// says: the state dir and <state-dir>/runs are root's and only searchable by others (0711), so nobody lists
// the runs or reads the journal, tokens or records; in a run's directory (0711) the logs are root's alone
// (0700: the daemon writes them from the step's output), and what the run's sandbox user may write is its own
// (0700): files/ (the $GITHUB_* files), home/ ($HOME), tmp/ ($TMPDIR, $RUNNER_TEMP) and src/ (the commit's
// worktree) with its git admin dir in the mirror. Another run's user can enter none of them.
#include <string>
#include <utility>
#include <vector>

#include "exec/run_as.h"
#include "util/state_paths.h"

namespace pto {

/// The state dir and its runs/ closed to others (0711). "" or what could not be done.
std::string close_state_dir(const std::string& state_dir);

/// The run's directory as above, for `user` (nullptr: no sandbox; the same modes, all the daemon's). Blocking
/// (src/ may hold thousands of files): called off the engine thread. "" or the first problem.
std::string prepare_run_tree(const std::string& run_dir, const RunAs* user);

/// The run ended: what its user owned goes (files/, home/, tmp/) or back to root (src/ and its admin dir),
/// before the user is lent again. Blocking. "" or the first problem.
std::string reclaim_run_tree(const std::string& run_dir);

// Each attempt of a step with `tests:` writes its reports in run_test_reports()/STEP-ATTEMPT/ (its user's,
// 0700) in a directory that is root's (0711), so the daemon reads them beneath a directory the step cannot
// replace; removed with files/ when the run ends (the cases read from them are in the run's record). The
// parts' names are util/state_paths'.

/// The first directory on the way to `path` that others cannot search (mode without o+x), "" when every one
/// can be: sandbox users must reach their run's tree.
std::string unsearchable_ancestor(const std::string& path);
/// "" when sandbox users can reach each of `dirs` ({path, what it is}), else which ancestor closes which, and
/// how to open it (chmod o+x, or `otherwise`).
std::string unreachable_by_users(const std::vector<std::pair<std::string, std::string>>& dirs, const std::string& otherwise);

}  // namespace pto
