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
/// The worktree of a run of one commit.
inline std::string run_worktree(const std::string& run_dir) { return run_dir + "/src"; }

}  // namespace pto
