#pragma once
// A run's engine state kept in the journal's SQLite file (its own tables and connection), so a daemon that
// starts again goes on with a run whose steps outlived the last one (SPEC "Nothing lost when the daemon stops").
// Written on the engine thread at every step transition: the run's head (its own and its jobs' fields,
// engine/run_state_json run_head_json) and the one step that changed, so a transition costs one step, not the
// run. Dropped once the run has finished. Calls never throw (false or nothing, the reason in error()).
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace pto {

class EngineStateJournal {
 public:
  static std::unique_ptr<EngineStateJournal> open(const std::string& path, std::string& error);
  /// On the journal's own connection (`journal` outlives it): a transition's event and its engine state are
  /// then written by one connection, one transaction (RunHistory::step_transition).
  static std::unique_ptr<EngineStateJournal> on(sqlite3* journal, std::string& error);
  ~EngineStateJournal();
  EngineStateJournal(const EngineStateJournal&) = delete;
  EngineStateJournal& operator=(const EngineStateJournal&) = delete;

  /// Step (job, step) as it is now, with the run's head (unless null), in one transaction; with `view`, the
  /// step as the API renders it too (what a journal event would carry: store/run_history keeps it here
  /// instead, one row a transition rather than two). Without, the view last kept stays.
  bool save(const std::string& run, const nlohmann::json* head, int job, int step, const nlohmann::json& step_state,
            const nlohmann::json* view = nullptr);
  /// The run's head alone (a job ended, the run's own fields changed, a group's commit); unchanged, not written.
  bool save_head(const std::string& run, const nlohmann::json& head);
  /// The run's whole state (run_state_json's shape): its head with each job's saved steps; nothing when none
  /// was saved. Steps never saved are absent (the caller fills them in from the plan).
  std::optional<nlohmann::json> load(const std::string& run);
  /// The kept views of run `run`'s steps put into `record` (a run's JSON: its skeleton with its events applied),
  /// each in place of its step: what the run looked like at its last transitions.
  void apply_views(const std::string& run, nlohmann::json& record);
  bool drop(const std::string& run);
  /// A transaction that held its writes was not committed: its head is written again next time.
  void forget_written(const std::string& run) { heads_.erase(run); }
  const std::string& error() const { return error_; }

 private:
  explicit EngineStateJournal(sqlite3* db);
  sqlite3* db_;
  bool owns_ = true;
  std::unique_ptr<class StmtCache> stmts_;  // its statements, prepared once (written at every step transition)
  std::map<std::string, std::string> heads_;  // each run's head as last written: unchanged, it is not written again
  std::string error_;
};

}  // namespace pto
