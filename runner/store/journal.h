#pragma once
// Journal: every run, job and step transition in SQLite (WAL), so history survives restarts and a crash can
// be recovered from. Logs stay files; the journal stores their paths.
//
// Tables: runs (one row per run: request, plan-shaped skeleton at creation, final record at the end) and
// events (every transition, carrying the job's or step's whole JSON). A run's state at any moment is its
// skeleton with its events applied in order, which is exactly what recovery does after a crash. Where the
// engine's state is kept (a supervised daemon: store/engine_state_journal), a step's JSON is kept in its row
// there instead of an event, and recovery applies it after the events (RunHistory::recover).
#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace pto {

class Stmt;
class StmtCache;
class WalCheckpointer;

struct RunSummary {
  std::string id, state, created, finished;
  int result = -1;
  nlohmann::json request;
};

class Journal {
 public:
  static std::unique_ptr<Journal> open(const std::string& path, std::string& error);
  /// For readers that must not create or change anything (`plan`, `run` reading learned durations):
  /// nothing when the file does not exist or cannot be opened.
  static std::unique_ptr<Journal> open_readonly(const std::string& path);
  ~Journal();
  /// For the tables that share its connection and its thread (store/engine_state_journal): one connection
  /// writing the file means no other's page cache to invalidate, and a transition's writes in one transaction.
  sqlite3* connection() const { return db_; }
  /// Who copies the WAL back into the file (store/wal_checkpointer): null when SQLite's commits do it.
  WalCheckpointer* checkpoints() const { return checkpoints_.get(); }

  // Writes never throw: a full disk, an I/O error or a read-only remount must not take the daemon down. Each
  // returns false on failure, with the reason in write_error() (cleared by the next write that succeeds).
  /// `skeleton` as dump_json wrote it (the caller writes the same text beside the run's logs).
  bool run_created(const std::string& id, const std::string& created, const nlohmann::json& request,
                   const std::string& skeleton);
  /// `kind` is "job" or "step"; `data` is that job's or step's JSON as the API renders it.
  bool event(const std::string& run, const std::string& kind, int job, int step, const nlohmann::json& data);
  /// `text` is `record` as dump_json wrote it.
  bool run_finished(const std::string& id, const std::string& state, int result, const nlohmann::json& record, const std::string& text);
  /// `f`'s writes (this journal's and those sharing its connection) as one transaction: one commit instead of
  /// one per write. `f`'s answer, false too when the commit failed (write_error() says why).
  bool together(const std::function<bool()>& f);
  /// A group commit (store/run_history: the transitions of one turn of the daemon's loop). begin_group opens a
  /// transaction (false: one is open already, or it cannot begin); the writes that follow are in it until
  /// commit_group, which is false (write_error() says why) when everything since begin_group is gone.
  /// group_lost(): SQLite rolled the open group back itself (a full disk, an I/O error).
  bool begin_group();
  bool commit_group();
  bool group_lost() const;
  const std::string& write_error() const { return write_error_; }
  const std::string& path() const { return path_; }

  /// SQLite's quick integrity check: "" when the file is sound, else what is wrong.
  std::string check_integrity() const;
  std::size_t run_count() const;
  /// A finished run's final record, put back by a rebuild from its run directory.
  bool restore_run(const nlohmann::json& record);

  // Reads after start never throw either (an I/O error or a page gone bad while serving): each answers as if
  // nothing were there, except has_run (true: a run directory is never removed on doubt), and says why in
  // read_error() (cleared by the next read that succeeds).
  const std::string& read_error() const { return read_error_; }
  std::vector<RunSummary> list_runs(int limit) const;
  std::optional<nlohmann::json> run_record(const std::string& id) const;
  /// Runs never marked finished, each rebuilt from its skeleton and events.
  std::vector<nlohmann::json> unfinished_runs() const;
  std::map<std::string, int> runs_by_state() const;
  bool has_run(const std::string& id) const;

  /// Deletes finished runs beyond the newest `max_runs` or finished before `finished_before` (ISO time; empty:
  /// no age bound); 0 max_runs: no count bound. Returns the ids deleted, for their files to go too.
  std::vector<std::string> prune(int max_runs, const std::string& finished_before);
  /// Finished runs other than the newest `keep`, newest first.
  std::vector<std::string> finished_runs_after(int keep) const;

  /// How long steps (by their step keys) took when they succeeded, in one transaction; the newest
  /// `kKeptDurations` of each key are kept.
  struct DurationRow {
    std::string key;
    double seconds = 0;
    std::string finished;
  };
  bool record_durations(const std::vector<DurationRow>& rows);
  /// The newest durations of a step key, newest first.
  std::vector<double> durations(const std::string& step_key) const;
  /// The same for many keys in one query (a plan of 1,000 steps asked once, not 1,000 times); keys without any
  /// are left out.
  std::map<std::string, std::vector<double>> durations(const std::vector<std::string>& step_keys) const;
  static constexpr int kKeptDurations = 20;

  /// What happened on a card (a step or lease that held it, a health check, a drain or return), as
  /// read_model/card_history holds it: `at` is when it ended (seconds since the epoch), `data` its JSON text.
  struct CardEventRow {
    int card = 0;
    double at = 0;
    std::string data;
  };
  /// Rows in one transaction (all or none). Rows older than kCardEventDays go at the first write of each hour.
  bool add_card_events(const std::vector<CardEventRow>& rows);
  /// Card events that ended at or after `since`, oldest first.
  std::vector<std::pair<int, nlohmann::json>> card_events(double since) const;
  static constexpr double kCardEventDays = 7;

 private:
  explicit Journal(sqlite3* db, std::string path = "");
  /// The connection's statement, prepared once (store/sqlite_stmt StmtCache).
  Stmt stmt(const char* sql) const;
  void exec(const char* sql) const;
  template <typename F>
  bool write(F&& f);
  template <typename T, typename F>
  T read(T fallback, F&& f) const;
  nlohmann::json replay(const std::string& id, nlohmann::json skeleton) const;
  sqlite3* db_;
  std::unique_ptr<StmtCache> stmts_;  // finalized before db_ closes
  std::unique_ptr<WalCheckpointer> checkpoints_;  // stopped before db_ closes (store/wal_checkpointer)
  std::string path_;
  std::string write_error_;
  double card_events_pruned_at_ = 0;
  mutable std::string read_error_;
};

}  // namespace pto
