#pragma once
// Where a run lives in the state dir, spelled once: <state-dir>/runs/<id> holds its logs/, files/, home/,
// tmp/ and run.json, and src/ (its commit's worktree, with `source:`). Who owns each part is
// sandbox/run_tree's; what is kept and pruned is store/run_history's.
#include <string>

namespace pto {

/// The journal (store/journal), which the test history (store/case_history) shares.
inline std::string journal_file(const std::string& state_dir) { return state_dir + "/journal.sqlite"; }
inline std::string runs_dir(const std::string& state_dir) { return state_dir + "/runs"; }
inline std::string run_dir(const std::string& state_dir, const std::string& run_id) { return runs_dir(state_dir) + "/" + run_id; }
/// Its record once finished (what GETs of finished runs read, and what a lost journal is rebuilt from).
inline std::string run_record(const std::string& run_dir) { return run_dir + "/run.json"; }
/// The worktree of a run of one commit, and the git admin dir that worktree's removal needs.
inline std::string run_worktree(const std::string& run_dir) { return run_dir + "/src"; }
inline std::string run_worktree_admin(const std::string& run_dir) { return run_dir + "/worktree-admin"; }
/// Each step's log (root's: a step writes it through its pipe, never opens it).
inline std::string run_logs(const std::string& run_dir) { return run_dir + "/logs"; }
/// Each step's $GITHUB_ENV, $GITHUB_OUTPUT, ... (`files/N-M`), the run user's.
inline std::string run_files(const std::string& run_dir) { return run_dir + "/files"; }
/// The run user's $HOME and $TMPDIR.
inline std::string run_home(const std::string& run_dir) { return run_dir + "/home"; }
inline std::string run_temp(const std::string& run_dir) { return run_dir + "/tmp"; }
/// What the lead job found (PTOAS_*), for the run's later steps.
/// A protected run's ccache directory for cache NAME (statistics and temporary files; its results go to the
/// protected tier): the run's own, gone with tmp/, so nothing planted there reaches a later run.
inline std::string run_ccache_dir(const std::string& run_dir, const std::string& name) { return run_temp(run_dir) + "/ccache-" + name; }
/// Where a step attempt's ccache writes its statistics log (CCACHE_STATSLOG), read when the attempt ends.
inline std::string run_ccache_stats(const std::string& run_dir, const std::string& attempt_label, const std::string& name) {
  return run_temp(run_dir) + "/ccache-stats-" + attempt_label + "-" + name + ".log";
}
inline std::string run_toolchain_env(const std::string& run_dir) { return run_dir + "/toolchain.env"; }
/// Where steps with `tests:` write their reports, and the pytest plugin that writes them.
inline std::string run_test_reports(const std::string& run_dir) { return run_dir + "/tests"; }
inline std::string run_pytest_plugin(const std::string& run_dir) { return run_dir + "/pytest"; }

}  // namespace pto
