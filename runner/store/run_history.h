#pragma once
// RunHistory: the journal's one face. What the daemon keeps of runs beyond their life, and the one owner of it. The SQLite journal
// (store/journal: each run's request and skeleton, every transition, the final record), each run's run.json
// beside its logs (written whole, fsync'ed, renamed: what GETs of finished runs read, and what a lost journal
// is rebuilt from), recovery of the runs a dead daemon left, retention, and the history half of the read
// model (recent runs, counts by result, records only memory holds while the disk refuses them).
//
// Writes never throw and never stop the daemon: a failing journal is logged once while it lasts, the run it
// was for is ended by the daemon (on_write_failed), and runs that finished meanwhile are journaled when
// writes work again. Engine thread only; directory removals go to the git workers.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/runner_config.h"
#include "read_model/read_model.h"
#include "read_model/card_history.h"
#include "store/engine_state_journal.h"
#include "store/journal.h"
#include "store/case_history.h"

#include <boost/asio/steady_timer.hpp>

namespace boost::asio {
class io_context;
class thread_pool;
}

namespace pto {

class GitMirror;

class RunHistory {
 public:
  static constexpr std::size_t kRecentRuns = 1000;  // finished runs the read model lists (GET /api/v1/runs)

  /// `on_write_failed(run, why)`: a journal write for an active run failed.
  RunHistory(std::string state_dir, ReadModel& model, boost::asio::thread_pool& removals, GitMirror* mirror,
             std::function<void(const std::string& run, const std::string& why)> on_write_failed);
  /// Waits for the test history's pending writes.
  ~RunHistory();
  /// Opens the journal and checks it; rebuilds it from the run directories when asked (the damaged file is
  /// moved aside) or when it is missing or empty while run directories exist. "" or the error, with the fix.
  std::string open(bool rebuild);
  /// After a crash: every run the journal never saw finish is marked interrupted (its running steps
  /// interrupted, the rest cancelled) and whatever still carries its marker is killed.
  /// Runs in `adopted` (taken over by this daemon: hosting/run_host_adopt.cpp) are left alone.
  void recover(const std::set<std::string>& adopted = {});
  /// Fills the read model's recent runs and counts, and gives every finished run a run.json (a run older than
  /// run.json, or whose record could not be written, is served from it like the others).
  void load();

  void run_created(const std::string& id, const std::string& created, const nlohmann::json& request, const nlohmann::json& skeleton);
  /// A step's transition: its event (`data`) and, with `step_state`, the engine's own state of it
  /// (engine_state_changed), in one transaction of the journal's connection; with `head` the run's head too
  /// (null: written by its group's commit, RunReporter).
  void step_changed(const std::string& run, int job, int step, const nlohmann::json& data, const nlohmann::json* head = nullptr,
                    const nlohmann::json* step_state = nullptr);
  /// A job ended: its event, and the run's record as it is now beside the logs (`record` null: not written,
  /// the run's own end writes it at once).
  void job_finished(const std::string& run, int job, const nlohmann::json& data, const nlohmann::json* record);
  /// The engine's own state of a run at step (job, step)'s transition (store/engine_state_journal), for a
  /// daemon that takes the run over after this one; `step_state` null: only the head changed.
  void engine_state_changed(const std::string& run, const nlohmann::json& head, int job, int step, const nlohmann::json& step_state);
  /// A run's engine state as last kept (nothing when none was).
  std::optional<nlohmann::json> engine_state(const std::string& run);
  /// What a successful step took (store/learned_durations): kept here and written kDurationBatch at a time, and
  /// at each run's end and flush(), in a transaction of their own. A step's commit then writes its own rows,
  /// not the durations' table and index too (they were a third of the journal's pages a step). Estimates only:
  /// a SIGKILL loses what was not written yet.
  void record_duration(const std::string& step_key, double seconds, const std::string& finished);
  static constexpr std::size_t kDurationBatch = 256;
  /// Something happened on a card: into the read model's card history now, and into the journal now or, once
  /// batch_card_events was called, within kCardEventBatchSeconds with the others of that time, in one
  /// transaction (a commit per lease's end was a tenth of the daemon's work per lease: bench/README.md).
  /// A SIGKILL loses at most that last moment of the cards' history; a stop or a hand-over writes it (flush).
  void card_event(CardEvent e);
  void batch_card_events(boost::asio::io_context& io);
  static constexpr double kCardEventBatchSeconds = 0.1;
  /// Writes what is waiting (this turn's group, card events) now.
  void flush();
  /// Group commit (store/run_history_commits.cpp): the step transitions and learned durations journaled in one
  /// turn of `io`'s loop share one transaction, committed when the turn ends or, before that, by durable().
  /// A commit per transition was a quarter of the daemon's work per step (bench/README.md). Without this,
  /// each is committed as it is written. Only writes on this thread are grouped.
  void group_commits(boost::asio::io_context& io);
  /// What was journaled is committed now. Called before anything that follows from it leaves the daemon: a
  /// step's processes start or are signalled (RunJournal::durable), an answer goes out (HostCommands::durable),
  /// another connection of the journal's file writes (store/side_table), and before every other write of the
  /// journal. A commit that fails loses the group: each run it held is told (on_write_failed), and the engine
  /// state's memory of what it wrote is dropped.
  void durable();
  /// Whether this thread's writes go into a group (group_commits, on its thread): what is written then may be
  /// left to its commit.
  bool grouping() const;
  /// Called in durable() before a group is committed, with the group open: a writer that leaves the last of a
  /// turn's writes to the commit (RunReporter: a run's head once a group, not once a transition) makes them.
  void set_before_commit(std::function<void()> f) { before_commit_ = std::move(f); }
  void run_finished(const std::string& id, const std::string& state, int result, const nlohmann::json& record);
  /// A finished step's test cases into the test history, on the history's writer thread (a failing write is
  /// logged while it lasts, and costs the run nothing: the run's own record keeps its tests).
  void record_tests(StepTests step);
  /// The test history's connection for the engine thread: the API's mutes (null when its tables could not be
  /// made: said at start).
  TestHistory* test_mutes() { return test_mutes_.get(); }
  /// Tests flaky within the read model's window, as the writer last counted them (for the metrics).
  int tests_flaky() const { return tests_flaky_; }
  /// Called on the writer thread after each step's tests are written (the daemon posts a refresh of the view).
  void set_on_tests_written(std::function<void()> f) { on_tests_written_ = std::move(f); }
  bool journal_failing() const { return journal_failing_; }
  const Journal& journal() const { return *journal_; }

  /// Retention (`retention`, `keep_worktrees` worktrees): prunes journal rows, run directories and worktrees;
  /// at start also run directories the journal does not know, except those `live` says are in use.
  /// Test history older than `tests_retention_days` goes too.
  void prune(const RetentionConfig& retention, double tests_retention_days, int keep_worktrees, bool at_start,
             const std::function<bool(const std::string&)>& live);
  /// Removes a run directory (and its worktree through the mirror) on the git workers.
  void remove_run_dir(const std::string& run_dir);

 private:
  void journal_result(bool ok, const std::string& run_id);
  /// `f`'s writes for `run` ("" none) in this turn's group, opened now when none is: false when there is no group
  /// (not grouping, another thread, or its transaction cannot begin) and the caller writes on its own.
  bool grouped(const std::string& run, const std::function<bool()>& f);
  /// The open group is gone (a failed or lost commit): each run it held is told.
  void group_failed();
  bool save_engine_state(const std::string& run, const nlohmann::json* head, int job, int step, const nlohmann::json& step_state,
                         const nlohmann::json* view = nullptr);
  void stop_grouping();
  /// run.json, written whole (or, failing, a finished run's record is held in memory). `text` is `record` dumped.
  void write_record(const std::string& id, const nlohmann::json& record);
  void write_record(const std::string& id, const nlohmann::json& record, const std::string& text);
  std::size_t rebuild();
  void remember_finished(const nlohmann::json& record);

  std::string state_dir_;
  ReadModel& model_;
  boost::asio::thread_pool& removals_;
  GitMirror* mirror_;
  std::function<void(const std::string&, const std::string&)> on_write_failed_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<EngineStateJournal> engine_state_;  // null when its tables could not be made (said at open)
  bool engine_state_failing_ = false;
  // The test history: `tests_` is the writer thread's alone (steps' results, pruning, the flaky count),
  // `test_mutes_` the engine thread's. The writer is joined before either goes.
  std::unique_ptr<TestHistory> tests_, test_mutes_;
  bool tests_failing_ = false;  // the writer's
  std::atomic<int> tests_flaky_{0};
  std::function<void()> on_tests_written_;
  double tests_pruned_at_ = 0;  // engine thread
  std::unique_ptr<boost::asio::thread_pool> tests_writer_;
  std::map<std::string, nlohmann::json> unjournaled_;  // finished runs the journal could not take yet
  std::vector<Journal::CardEventRow> card_rows_;         // card events not in the journal yet
  std::vector<Journal::DurationRow> durations_;          // learned durations not in the journal yet
  void write_durations();
  std::unique_ptr<boost::asio::steady_timer> card_flush_;  // null: each is written at once
  bool journal_failing_ = false, record_failing_ = false;
  // Group commit: the loop whose turns group the writes, the thread they run on, whether a group is open and its
  // commit posted, the runs it holds; the side-write hook this replaced (store/side_table).
  boost::asio::io_context* group_io_ = nullptr;
  std::thread::id group_thread_;
  bool group_open_ = false, group_posted_ = false;
  std::set<std::string> group_runs_;
  std::function<void()> outer_side_write_hook_;
  std::function<void()> before_commit_;
  std::shared_ptr<int> group_alive_ = std::make_shared<int>(0);  // the posted commit's check that this still lives
};

/// A finished run's record as the run list shows it.
RunOverview overview_of_finished(const nlohmann::json& record);

}  // namespace pto
