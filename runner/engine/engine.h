#pragma once
// RunEngine: one run's state machine, with GitHub Actions semantics for needs, if:, continue-on-error,
// fail-fast and timeouts, plus pto-runner's lead job, parallel steps and card requests.
//
// Every transition happens on the io_context thread: process exits, card grants, timers and cancels all
// arrive as callbacks there and end in pump(), which moves every job and step as far as it can go. Every
// change of a step's state goes through transition(), which applies it, journals it (RunJournal) and then
// notifies (RunObserver), in that order; what flows between steps is DataFlow's (engine/data_flow.h).
// Time comes from the Clock it is given, so tests drive retries and time bounds with a ManualClock.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <string>
#include <string_view>

#include "engine/card_broker.h"
#include "engine/data_flow.h"
#include "engine/engine_options.h"
#include "engine/run_journal.h"
#include "engine/run_state.h"
#include "exec/executor.h"
#include "plan/plan.h"
#include "testcases/junit_reader.h"
#include "util/clock.h"
#include "util/exit_code.h"

namespace boost::asio {
class io_context;
}

namespace pto {

/// What views (console, GitHub, the daemon's read model and metrics) hear about, after the journal. Called on
/// the engine thread.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  /// Every step transition; the record holds the new state, `from` is the one it left (Running -> Waiting is
  /// an attempt that ended and is retried).
  virtual void on_step_changed(const RunRecord&, const Plan&, int /*job*/, int /*step*/, StepState /*from*/) {}
  virtual void on_step_output(const RunRecord&, const Plan&, int /*job*/, int /*step*/, std::string_view /*line*/) {}
  virtual void on_job_finished(const RunRecord&, const Plan&, int /*job*/) {}
  virtual void on_run_finished(const RunRecord&, const Plan&) {}
  /// An attempt of a step failed with `failure` (its cause and evidence); `retried`: another attempt follows.
  virtual void on_attempt_failed(const RunRecord&, const Plan&, int /*job*/, int /*step*/, const StepRecord::Failure& /*failure*/,
                                 bool /*retried*/) {}
  /// A health check of `card` ended (not cancelled): `seconds` it took, `failure` "" or how it failed.
  virtual void on_health_check(const RunRecord&, int /*card*/, const std::string& /*command*/, double /*seconds*/,
                               const std::string& /*failure*/) {}
};

/// What a run is driven by and reports to. Each outlives the engine.
struct EngineSeams {
  boost::asio::io_context& io;  // where callbacks are posted
  Clock& clock;
  CardBroker& broker;
  Executor& executor;
  RunObserver* observer = nullptr;
  RunJournal* journal = nullptr;
};

class RunEngine {
 public:
  RunEngine(EngineSeams seams, Plan plan, EngineOptions opts);
  ~RunEngine();

  /// Before start(): every step of the run but the lead job runs as `user` (a daemon's sandbox user), with its
  /// own $HOME and $TMPDIR in the run's directory (sandbox/run_tree), and hands back files only it owns.
  /// The trees of the run's inputs (reuse/result_key: by globs_text of a step's `reuse.inputs`), known before
  /// it starts: with EngineOptions::reuse, a step whose result key has a green result is `reused`.
  void set_input_trees(std::map<std::string, std::string> trees) { input_trees_ = std::move(trees); }
  const std::map<std::string, std::string>& input_trees() const { return input_trees_; }
  void run_as(const RunAs& user);
  void start();
  /// How a running step of an adopted run is found again (the daemon's supervisor, hosting/hosted_run): by
  /// its marker, holding `cards`; `done` once it ends. Its handle, or 0 when nothing holds it any more. With
  /// `done` null the step has ended already (its reports were being read): only its cards are held again.
  using Reattach = std::function<std::uint64_t(std::size_t job, std::size_t step, const std::string& marker, const std::vector<int>& cards,
                                               std::function<void(const StepOutcome&)> done)>;
  /// Instead of start(): goes on with a run an earlier daemon started (SPEC "Nothing lost when the daemon
  /// stops", engine/engine_adopt.cpp). `saved` is its state as journaled (store/engine_state_journal); running
  /// steps are reattached, waiting ones queued again, its clock and job timeouts carried on. "" or why the
  /// state does not fit this plan (then nothing was changed: the caller ends the run as interrupted).
  std::string adopt(RunRecord saved, const Reattach& reattach);
  /// Cancels everything: nothing new starts, running steps get SIGTERM then SIGKILL. `signal` (SIGINT or
  /// SIGTERM, 0 for an API cancel) decides the exit code; `reason`, when given, is what its jobs and steps
  /// say instead of "the run was cancelled" (and the record's cancel_reason).
  void cancel(int signal, const std::string& reason = "");
  /// A newer run of the same pull request replaces this one: cancelled as by an API cancel, saying by which.
  void supersede(const std::string& newer_run);
  /// Ends the run because the host failed it (its journal cannot be written): everything is cancelled as by
  /// cancel(0), and the run ends `failed` with exit 3 and `problem` among its infrastructure problems.
  void abort(const std::string& problem);
  /// A lease of step (job, step)'s current attempt ended and its client said how its command did
  /// (task-submit): the lease's cause, its cards charged when they caused it, and evidence for the step's
  /// cause should it fail (engine/engine_health.cpp). Null when the lease did not fail. `test`: the test that
  /// took it (its cards are that test's, engine/engine_cases.cpp).
  const StepRecord::Failure* lease_ended(std::size_t job, std::size_t step, const std::string& lease, const std::vector<int>& cards,
                                         int exit_code, int signal, const std::string& output, const std::string& test = "");
  /// Attached runs (engine/engine_attach.cpp): before start(), every job but `names` (with what they need,
  /// and the lead job when they need the toolchain) is held: it starts only once a client wants it.
  void hold_all_but(const std::vector<std::string>& names);
  /// A later client wants these jobs too (and what they need): they start as their needs allow.
  void want(const std::vector<std::string>& names);
  /// An interrupted client's own jobs: cancelled (held ones skipped as cancelled) with `reason`.
  void unwant(const std::set<std::string>& names, const std::string& reason);
  /// No client is left: every held job is skipped with `reason`, so the run can end.
  void release_held(const std::string& reason);
  /// The first of `names` the plan has no job of ("" when all are there).
  std::string unknown_job(const std::vector<std::string>& names) const;
  std::set<std::string> with_needs(const std::vector<std::string>& names) const;
  /// The cards a retry elsewhere of (job, step) must not get, its leases' too.
  std::vector<int> avoided_by(std::size_t job, std::size_t step) const;
  bool finished() const { return finished_; }
  ExitCode result() const;
  const RunRecord& record() const { return run_; }
  /// How far the run has changed, for a client that looks again (GET /api/v1/runs/{id}?since=): `number` grows
  /// with every change of a step that is kept (a transition, a verdict, a control, its kept state). Memory
  /// only: `epoch`, drawn at random for each engine, tells this engine's numbers from another's (a run taken
  /// over after a restart counts again from zero).
  struct Revision {
    std::uint64_t epoch = 0, number = 0;
  };
  Revision revision() const { return {epoch_, revision_}; }
  /// Whether (job, step) changed after revision `number` of this engine (a split step's collection changes
  /// with each of its shards).
  bool changed_since(std::size_t job, std::size_t step, std::uint64_t number) const { return step_revisions_[job][step] > number; }
  /// The run does not end while held (a control run of one of its steps is under way); a release lets it.
  void hold_finish() { ++finish_holds_; }
  void release_finish();
  /// A step's control on the merge base is in: `control.note` joins its verdict ("also fails on main at ...");
  /// journaled (the step's state does not change).
  void set_control(std::size_t job, std::size_t step, StepRecord::Control control);
  /// A perf step waiting for its pair (EngineOptions::Perf::paired): take another sample, on its cards; or end
  /// it, with the comparison's words, how it changed (slower | faster | none | ""), the other build's samples
  /// and whether it is red (a gate). Nothing when the step is not waiting for its pair.
  void perf_next(std::size_t job, std::size_t step);
  void perf_settle(std::size_t job, std::size_t step, const std::string& verdict, const std::string& change,
                   const std::vector<double>& other_samples, bool red);
  /// The run's secrets' masks (what a step printed is masked with them wherever it is shown or sent).
  const SecretMask& mask() const { return *opts_.mask; }
  /// The same masks, shared (an executor that hears of values a step masked itself adds them here).
  std::shared_ptr<SecretMask> shared_mask() const { return opts_.mask; }
  const Plan& plan() const { return plan_; }
  /// Seconds since start on the engine clock.
  double now() const;
  void set_on_finished(std::function<void()> f) { on_finished_ = std::move(f); }

 private:
  /// The one place a step changes state: applies `to` with its time, journals, notifies.
  void transition(std::size_t job, std::size_t step, StepState to);
  /// Every process the engine starts or signals goes through these: what was journaled is kept first
  /// (RunJournal::durable), so nothing outside the daemon follows from a transition a SIGKILL could still lose.
  std::uint64_t start_processes(Executor& exec, StepLaunch launch, std::function<void(const StepOutcome&)> done);
  void signal_processes(Executor& exec, std::uint64_t handle);
  /// A step changed: the next revision is its last change (its collection's too, for a shard), and the journal
  /// keeps it, as a transition (`transition`: its event) or as the engine's state alone. Every journaled change
  /// of a step goes through here, so a client asking what changed (revision()) misses none.
  void kept(std::size_t job, std::size_t step, bool transition);
  /// A job changes state; when it ends, journaled and notified (its steps' own ends came first).
  void set_job_state(std::size_t job, JobState to);

  void pump();
  bool needs_done(std::size_t job) const;
  bool needs_succeeded(std::size_t job) const;
  void start_job(std::size_t job);
  void skip_job(std::size_t job, JobState state, const std::string& reason);
  void advance(std::size_t job);
  bool try_start_step(std::size_t job, std::size_t step);
  void enqueue(std::size_t job, std::size_t step);
  void wait_timed_out(std::size_t job, std::size_t step, double limit_minutes);
  /// `preflighted`: health.preflight passed on `cards` (or there is none to run).
  void launch(std::size_t job, std::size_t step, const std::vector<int>& cards, bool preflighted = false);
  /// An attempt's processes ended: its end recorded, then judged (finish_attempt), its reports read first when
  /// it has `tests:` (off the engine's thread where EngineOptions::offload says).
  void on_done(std::size_t job, std::size_t step, const StepOutcome& o);
  void judge_attempt_end(std::size_t job, std::size_t step, const StepOutcome& o);
  /// The rest of an attempt's end once its reports (if any) are read: retry, rerun or its final state.
  /// `cancelled`: it was cancelled when it ended (a cancel that came while its reports were read changes
  /// nothing: it had ended by itself, and is judged as it ended).
  void finish_attempt(std::size_t job, std::size_t step, const StepOutcome& o, bool cancelled, bool judge_tests, ParsedReports reports);
  /// Where attempt `attempt` of a step writes cache `name`'s ccache statistics (CCACHE_STATSLOG).
  std::string cache_stats_log(std::size_t job, std::size_t step, const std::string& name) const;
  /// Blocking (the step's files, read with its reports): each log's counts, the logs removed.
  static std::map<std::string, CacheCounts> read_cache_stats(const std::vector<std::pair<std::string, std::string>>& logs);
  static void add_cache_counts(StepRecord& sr, const std::map<std::string, CacheCounts>& counts);
  /// A step about to be queued whose inputs were already tested green stands in with that result (`reused`):
  /// true when it did. Its result key is kept either way, for record_result.
  bool reuse_step(std::size_t job, std::size_t step);
  /// The step's result key (reuse/result_key) as its inputs and its needs' outputs stand now; empty when it
  /// may not be reused.
  std::string reuse_key(std::size_t job, std::size_t step) const;
  /// At a fresh run's start: a job each of whose steps has a green result already (its key known before its
  /// needs run, as they declare no outputs) is foreseen reused and waits for nothing; a lead job, or a job
  /// that says `reuse: false` (a build, a checkout), needed only by such jobs is skipped, not needed.
  void foresee_reuse();
  /// A perf step (engine_perf.cpp): where a sample's output begins; a sample's end, its number taken (true when
  /// another sample was queued: the attempt is not the step's end); the samples judged and kept.
  void begin_perf_sample(std::size_t job, std::size_t step);
  /// The cards a perf step's next sample must have (empty: any, a first sample of its own).
  std::vector<int> perf_cards(std::size_t job, std::size_t step) const;
  bool take_perf_sample(std::size_t job, std::size_t step, const std::vector<int>& cards);
  void judge_perf(std::size_t job, std::size_t step);
  /// Its samples as the history keeps them, with `verdict` and `change`; kept, and the step's verdict set.
  void keep_perf(std::size_t job, std::size_t step);
  /// A step that ended green with nothing doubtful in it (no failed attempt, no flaky or muted test, no
  /// $GITHUB_ENV or $GITHUB_PATH for later steps) may stand in for the same inputs later.
  void record_result(std::size_t job, std::size_t step);
  std::map<std::string, std::string> input_trees_;
  std::vector<bool> foreseen_jobs_;
  std::map<std::pair<std::size_t, std::size_t>, ReusableResult> foreseen_;  // found at the start, taken by reuse_step
  void fail_fast(std::size_t job);
  void finish_job(std::size_t job);
  void cancel_job(std::size_t job, const std::string& reason);
  void release_cards(const std::vector<int>& cards, bool infra, const std::string& label);
  /// The CPUs and memory its granted request holds, back to the broker (before its cards: their release
  /// schedules at once).
  void give_back_host(StepRecord& sr);
  void start_health_check(int card, const std::string& after);
  /// A check of one card (health check, preflight) as root runs it: `{device}` already replaced in `command`,
  /// its log <run dir>/logs/LOG_NAME-card-N.log, its own marker, health.check-timeout-seconds.
  StepLaunch card_check(int card, const std::string& command, std::string what, const std::string& log_name);
  /// health.preflight on each of a step's cards before it starts: all pass, it starts; one fails, the step
  /// goes back in the queue for other cards with its attempt count unchanged, and the card is charged.
  void start_preflight(std::size_t j, std::size_t s, const std::vector<int>& cards);
  void finish_preflight(std::size_t j, std::size_t s, const std::vector<int>& cards, const std::vector<int>& failed,
                        const std::string& why);
  /// The attempt that just ended failed: its cause and evidence, the cards charged; kept in its record.
  const StepRecord::Failure& record_failure(std::size_t j, std::size_t s, const StepOutcome& o);
  /// A plain failure on `cards`, one of which failed other runs' work lately, is that card's (its health).
  void blame_failing_cards(FailureEvidence& ev, const std::vector<int>& cards);
  /// Charges ev's cards (card or infra) to this run, each once per attempt; the cards' health notes.
  std::vector<std::string> charge_cards(StepRecord& sr, const FailureEvidence& ev);
  /// A step with `tests:` (engine/engine_cases.cpp): the attempt's report directory, the plugin and, for a
  /// rerun, what it selects. "" or why it cannot start.
  std::string prepare_tests(std::size_t j, std::size_t s, StepLaunch& l);
  /// Where the attempt's reports are and how much of them may be read.
  ReportQuery report_query(std::size_t j, std::size_t s) const;
  /// Judges the attempt's reports: the failure they make (null: none); `rerun`: a retry runs only the tests
  /// not yet passed.
  const StepRecord::Failure* take_tests(std::size_t j, std::size_t s, const StepOutcome& o, ParsedReports reports, bool& rerun,
                                        bool& exit_accounted);
  /// A split step's collection ended well: its collected ids read, split across its shards by learned
  /// durations (testcases/shard_split), each shard given its tests and estimate. "" or why it failed.
  std::string take_collection(std::size_t j, std::size_t s);
  /// A shard cannot run: its collection did not succeed, or no test fell to it. "" when it can.
  std::string shard_unrunnable(std::size_t j, std::size_t s) const;
  /// The verdict and cause of a final step from its tests, over the step's own.
  void settle_tests_verdict(std::size_t j, std::size_t s, StepState to);
  /// Its cause and one-line verdict once it is final (after failed attempts).
  void settle_verdict(std::size_t j, std::size_t s, StepState to);
  std::string label(std::size_t job, std::size_t step) const;
  Executor& executor_for(const PlanStep& step);
  void maybe_finish_run();
  void trace(const char* what, const std::vector<int>& cards);

  boost::asio::io_context& io_;
  Clock& clock_;
  Plan plan_;
  CardBroker& broker_;
  Executor& executor_;
  EngineOptions opts_;
  RunObserver* observer_;
  RunJournal* journal_;
  RunRecord run_;
  LegsByName legs_by_name_;
  /// What advance() needs of each job's steps without walking them all at every event (a 2,000-step job
  /// would make a run's cost grow with its square): kept by transition(), counted afresh by recount().
  struct JobTally {
    std::size_t final = 0;        // steps in a final state
    int active = 0;               // waiting or running
    std::size_t plain = 0;        // steps whose if: calls no status function
    std::size_t plain_final = 0;  // of those, final
    std::size_t scan_from = 0;    // parallel jobs: before it no plain step is pending
  };
  std::vector<JobTally> tally_;
  void recount();
  std::uint64_t epoch_ = 0, revision_ = 0;
  std::vector<std::vector<std::uint64_t>> step_revisions_;  // each step's last change (revision())
  DataFlow flow_;
  std::map<std::size_t, std::unique_ptr<Clock::Timer>> job_timeouts_;
  /// A step waiting for cards under timeout-minutes or queue-timeout-minutes.
  std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<Clock::Timer>> wait_timeouts_;
  std::optional<std::set<std::string>> wanted_;  // an attached run's wanted jobs (names); none: every job
  bool held(std::size_t job) const;
  bool started_ = false, finished_ = false, in_pump_ = false, pump_again_ = false;
  std::function<void()> on_finished_;
  std::map<int, std::uint64_t> health_checks_;  // card -> executor handle of its running health check
  std::map<std::pair<std::size_t, std::size_t>, std::vector<std::uint64_t>> preflights_;  // a step's running preflights
  int health_check_count_ = 0;
  int finish_holds_ = 0;
  double t0_ = 0;
};

}  // namespace pto
