#pragma once
// RunHost: the runs a daemon hosts, from a submission until nothing of a run is left on the host
// (docs/architecture.md, "The flow of one run"). The one owner of the hosted runs (each a HostedRun:
// hosting/hosted_run), of the submissions whose commit is being checked out, of the sandbox users and the runs
// waiting for one (hosting/user_queue), of the runs of one workflow run (hosting/attached_runs), and of the
// take-over at start of the runs an earlier daemon left to its steps' supervisor (run_host_adopt.cpp).
//
//   submit    with `source:` the commit is checked out into the run's worktree off the engine thread; its
//             definitions are loaded (with the host's settings), planned, made a HostedRun, journaled, given
//             its place among runs (the broker's priority; an older run of its pull request superseded) and
//             begun when a sandbox user is free (run_host.cpp)
//   cancel    on request, by a newer run of its pull request, or every run when the daemon stops
//   finished  its owner hears (a probe's or a control's verdict), it is journaled, given back, dropped
//
// Everything happens on the io_context's thread; checkouts go to the git pool and come back to it.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "bisect/probe_host.h"
#include "config/project.h"
#include "hosting/attached_runs.h"
#include "hosting/host_leases.h"
#include "hosting/hosted_run.h"
#include "hosting/user_queue.h"
#include "server/host_commands.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class GitMirror;
class RunHistory;
class RunReporter;
class SandboxPool;
class Shutdown;
class PerfHistory;
class StepResults;
struct Host;
struct ReadModel;
struct WorkerPools;

/// What the daemon lends its runs. Each outlives the RunHost.
struct RunHostParts {
  boost::asio::io_context& io;
  Host& host;
  const RunnerConfig& cfg;  // the host's settings as the last reload left them
  RunHistory& history;
  RunReporter& reporter;  // every run's journal and observer
  WorkerPools& pools;
  GitMirror* mirror;  // with `source:`: runs are of commits, each in its own worktree; null: of `load.root`
  Shutdown& stop;     // while the daemon stops, no new run
  ReadModel& model;   // its active runs are listed there
  StepResults* results = nullptr;  // green results a step may be reused from (reuse/); null: every step runs
  PerfHistory* perf = nullptr;     // perf steps' history (store/perf_history); null: judged against nothing
};

/// How the daemon was started: where definitions are read without `source:`, and whether steps only sleep.
struct RunDefaults {
  LoadOptions load;
  bool simulate = false;
  double time_scale = 0.01;
};

class RunHost {
 public:
  /// What the owner hears, and lends.
  struct Events {
    std::function<std::optional<TestMute>(const std::string& test)> muted;  // the mutes in force when a test fails
    std::function<void(HostedRun&)> finished;            // the engine is done, before the run is journaled
    std::function<void(const std::string& id)> cancelled;  // cancelled on request (its control runs go too)
    std::function<void()> refresh;                         // now: whoever asked reads the change next
    std::function<void()> changed;                         // soon
    std::function<void()> after_run;                       // a run was journaled at its end (retention)
    /// A perf step compared with another build took a sample (bisect/base_comparisons): the run, its step, the
    /// run's ref, commit and priority, and the commit it is compared with ("": its merge base).
    std::function<void(const std::string& run, std::size_t job, std::size_t step, const std::string& ref, const std::string& sha, int priority,
                       const std::string& against)>
        perf_sample;
  };
  RunHost(RunHostParts parts, RunDefaults defaults, std::unique_ptr<SandboxPool> sandbox, Events events);
  ~RunHost();

  /// A submission (HostCommands::submit_run): answered 201 once the run is made, or why not.
  void submit(RunSubmission s, const std::string& peer, HostCommands::Reply reply);
  Answer cancel(const std::string& id, const std::string& peer);
  Answer detach(const std::string& run, const std::string& client, bool cancel) { return attached_.detach(run, client, cancel); }
  /// `ended` is called at run `id`'s end, once its record is kept, unless it expired by then (a client's held
  /// GET that was answered at its own time: server/api `wait`).
  void when_ended(const std::string& id, std::weak_ptr<const std::function<void()>> ended);
  /// SIGTERM: no new runs, and no leases but accepted runs'; accepted runs go on to their end, then `done(0)`.
  /// Past `minutes` (shutdown-timeout-minutes) the rest is cancelled, then `done(143)` (hosting/shutdown).
  void drain(double minutes, std::function<void(int exit_code)> done);
  /// SIGINT, a second SIGTERM, a drain past its bound: every active run cancelled (SIGTERM to its steps) and
  /// every lease ended; `done(exit_code)` once all have stopped.
  void cancel_all(int exit_code, std::function<void(int exit_code)> done);
  /// A journal write for `run` failed: the run ends with an infrastructure error (on a later turn of the loop).
  void stop_for_journal(const std::string& run, const std::string& why);

  /// How bisections and control runs have their probe runs made: as submissions here, named for what asked
  /// (run_host_probes.cpp).
  ProbeHost probes();

  /// At start, before anything is submitted: the runs the last daemon left to its steps' supervisor go on
  /// here (run_host_adopt.cpp), and the leases that were theirs or an operator's. Returns the runs' ids.
  std::set<std::string> adopt();
  /// The cards' leases: its runs' (task-submit) and operators' (hosting/host_leases).
  HostLeases& leases() { return leases_; }

  HostedRun* find(const std::string& id);
  std::size_t size() const { return runs_.size(); }
  /// No run is hosted and no commit is being checked out.
  bool empty() const { return runs_.empty() && preparing_.empty(); }
  /// Nothing of it is active: no run, no checkout, no lease holding cards (an operator's lease's command would
  /// otherwise outlive the daemon's flock on its card). A finished run stays until it is given back (its tree
  /// returned to root, its user to the pool).
  bool quiet() { return empty() && leases_.book.granted_count() == 0 && leases_.book.active().empty(); }
  /// Run `id` is hosted or being checked out (its folder is not retention's to remove).
  bool holds(const std::string& id) const { return runs_.count(id) > 0 || preparing_.count(id) > 0; }
  const SandboxPool& sandbox() const { return *sandbox_; }
  std::vector<std::string> waiting_for_user() const { return users_.waiting(); }
  /// The daemon stops for good: no more retries of the runs waiting for a user.
  void stop() { users_.stop(); }

 private:
  /// Plans and makes a run whose definitions are loaded (in `root`, or a commit's worktree), then begins it.
  Answer start(EngineOptions eo, const RunSubmission& s, Project project, Diagnostics diags, const std::string& peer);
  /// What is journaled of a submission (never env values: they may be secrets).
  nlohmann::json request_of(const RunSubmission& s, const EngineOptions& eo) const;
  /// Its plan (every job of an attached run, only what a probe needs); `missing`: the probed step or test the
  /// commit lacks.
  Plan plan_of(const Project& project, const RunSubmission& s, Diagnostics& diags, std::string& missing);
  EngineOptions engine_options() const;
  /// What the host lends every run's engine: the lead executor, the mutes, the learned test durations.
  void lend_to_engine(EngineOptions& eo, const std::string& ref);
  /// How a run of `ref` reads and keeps its perf steps' history (store/perf_history); none without one.
  std::optional<EngineOptions::Perf> perf_hooks(const std::string& ref, const std::string& sha);
  /// How a run of `scope` finds and keeps reusable results (store/step_results).
  EngineOptions::Reuse reuse_hooks(const CacheScope& scope);
  /// A run as this host lends it (`run_token`: the one it had, a run taken over); keep() hosts it from then on
  /// (listed in the read model, given its place among runs, its end heard here).
  std::unique_ptr<HostedRun> make(Plan plan, EngineOptions eo, nlohmann::json request, const std::string& run_token = "");
  HostedRun& keep(std::unique_ptr<HostedRun> run);
  /// A run has its sandbox user and tree: its supervisor keeps what a next daemon needs to take it over.
  void begun(HostedRun& run);
  /// The run's handover to the step supervisor, now and each time a step's end adds to it.
  void keep_handover(HostedRun& run);
  void finished(HostedRun& run);
  /// The run's user went back: it leaves the host; waiting runs are started.
  void returned(const std::string& id);
  /// `supersede: pull-request`: the older active runs of `pull_request` are cancelled, naming run `id`.
  void supersede_older(const std::string& id, const std::string& pull_request);
  static bool adoptable(const nlohmann::json& request);
  /// `slurm_jobs`: the Slurm jobs of its steps taken over (their names) are added to it.
  std::string adopt_run(const nlohmann::json& journaled, const nlohmann::json& kept, std::set<std::string>& slurm_jobs);

  RunHostParts parts_;
  RunDefaults defaults_;
  std::unique_ptr<SandboxPool> sandbox_;  // the users steps run as; inactive (said loudly) without them
  Events events_;
  HostLeases leases_;  // before the runs: a run dropped unreturned forgets its tokens through its lease site
  std::map<std::string, std::unique_ptr<HostedRun>> runs_;  // hosted and not yet given back
  std::set<std::string> preparing_;                         // submissions whose commit is being checked out
  UserQueue users_;       // runs waiting for a sandbox user
  AttachedRuns attached_;  // submit --attach
  std::map<std::string, std::vector<std::weak_ptr<const std::function<void()>>>> end_watchers_;  // when_ended
};

/// Which pull request a submission is a run of ("" for none): "OWNER/REPO#N" from refs/pull/N/*, else
/// "OWNER/REPO:HEAD_REF" from github.head_ref.
std::string pull_request_of(const RunSubmission& s);

}  // namespace pto
