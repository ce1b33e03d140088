#pragma once
// HostedRun: one run as its host holds it, from its plan until nothing of it is left on the host. The same
// class for `serve` (the daemon holds many: hosting/run_host) and `run` (one: hosting/foreground_run); what a run
// needs of a host beyond its engine lands here (test results, control runs, bisection probes and re-adoption
// after a restart are more of the same hosting).
//
//   begin      a sandbox user lent to it alone (none free: begin() says so and the host calls again later),
//              its run tree handed to that user off the engine thread (sandbox/run_tree), then its engine
//   tokens     its own lease token, and one per running attempt of a step (PTO_RUNNER_LEASE_TOKEN), known to
//              the host's Access while they live: an attempt's leases end with it and last at most what its
//              timeouts leave (admit_lease)
//   leases     max-cards-per-run, a retry's leases kept off the cards its failure was charged to, its user
//              given the files of its leased cards while it holds them, a lease's report as evidence
//   finished   the host hears once, on a later turn of the loop, that the engine is done (to journal it)
//   give_back  its leases ended, its tokens forgotten, its tree back to root, its user back to the pool; then
//              the host hears that it may drop the run (and lend the user again)
//
// Everything happens on the host's io_context thread, as in the engine; the blocking file work goes to the
// host's `blocking` pool and comes back to that thread.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "exec/run_as.h"
#include "lease/lease.h"
#include "util/answer.h"
#include "util/ids.h"

namespace boost::asio {
class io_context;
class thread_pool;
}

namespace pto {

class Access;
class LeaseBook;
class UserLender;
struct Caller;
struct RunnerConfig;

/// Where a host's runs take cards themselves (task-submit): the tokens its lease endpoint accepts, the book
/// of its leases, and the URL its steps reach it at.
struct LeaseSite {
  Access& access;
  LeaseBook& book;
  std::string url;
};

/// What a host lends every run it holds. Each outlives the run.
struct RunHosting {
  boost::asio::io_context& io;
  Clock& clock;
  CardBroker& broker;
  Executor& executor;
  UserLender& users;
  const RunnerConfig& cfg;  // the host's settings as they are now (card files, max-cards-per-run)
  LeaseSite* leases = nullptr;                   // null: its steps take no cards themselves (a simulated run)
  boost::asio::thread_pool* blocking = nullptr;  // the tree's hand-over and return; null: on the calling thread
};

class HostedRun : private RunObserver {
 public:
  /// `observer` and `journal` are the host's (each outlives the run; either may be null). The engine's options
  /// get the run's lease endpoint and tokens here (`run_token`: the one it had, a run taken over; "" a new one).
  HostedRun(const RunHosting& host, Plan plan, EngineOptions eo, nlohmann::json request, RunObserver* observer, RunJournal* journal,
            const std::string& run_token = "");
  ~HostedRun() override;
  HostedRun(const HostedRun&) = delete;
  HostedRun& operator=(const HostedRun&) = delete;

  const std::string& id() const { return id_; }
  const std::string& run_dir() const { return run_dir_; }
  RunEngine& engine() { return *engine_; }
  const RunEngine& engine() const { return *engine_; }
  /// What was asked for, as journaled (jobs, ref, sha, github, env names: never env values).
  const nlohmann::json& request() const { return request_; }
  nlohmann::json& request() { return request_; }
  /// The user lent to it (null: none, or not yet).
  const RunAs* user() const { return user_ ? &*user_ : nullptr; }

  /// Lends it a user and starts it. False when every user is lent: nothing happened; call again once one is
  /// given back.
  bool begin();
  bool begun() const { return begun_; }
  /// What a next daemon needs to take this run over and must never be written to disk (its steps' base
  /// environment with its secrets and lease token, its masks, its user): kept in its steps' supervisor's memory.
  nlohmann::json handover() const;
  /// Called when what handover() says has grown (a step masked a value, or wrote $GITHUB_ENV), after a step's end.
  void set_on_handover_changed(std::function<void(HostedRun&)> f) { on_handover_changed_ = std::move(f); }
  /// A running step of a run taken over, found again: its handle (0: nothing holds it) and its attempt's lease
  /// token.
  struct Reattached {
    std::uint64_t handle = 0;
    std::string lease_token;
  };
  using Reattach = std::function<Reattached(const StepId& step, const std::string& marker, const std::vector<int>& cards,
                                            std::function<void(const StepOutcome&)> done)>;
  /// Instead of begin(): goes on with a run an earlier daemon hosted (hosting/run_host_adopt.cpp), from its
  /// journaled engine state, as `user` again (its sandbox user's name; "" none). "" or why it cannot.
  std::string adopt(RunRecord saved, const std::string& user, const Reattach& reattach);
  /// The engine's cancel, supersede and abort, with the run's leases ended too. A run that never began ends at
  /// once.
  void cancel(int signal, const std::string& reason = "");
  void supersede(const std::string& newer_run);
  void abort(const std::string& problem);

  /// A lease its caller asks for in this run's name: refused past max-cards-per-run; a step's attempt's own
  /// lease is that step's, kept off the cards its failure was charged to, and bounded by what the attempt's
  /// timeouts leave. Nothing when it may go on to the queue.
  std::optional<Answer> admit_lease(LeaseRequest& request, const Caller& by) const;
  /// Its user may open the files of lease `l`'s cards (granted) or no longer.
  void lease_card_access(const Lease& l, bool granted);
  /// A lease of one of its steps ended and its client said how its command did: evidence for that step
  /// (RunEngine::lease_ended). Null when it did not fail or was no step's.
  const StepRecord::Failure* lease_ended(const Lease& l);

  /// Called once the engine has finished, on a later turn of the loop.
  void set_on_finished(std::function<void(HostedRun&)> f) { on_finished_ = std::move(f); }
  /// Once finished: everything of it leaves the host (leases, tokens, tree, user). `done` is called on the
  /// engine thread once it has; the run must live until then.
  void give_back(std::function<void()> done);

 private:
  struct StepToken {
    std::string token;
    double deadline = 0;  // host clock; 0: the attempt has no time bound
  };
  std::string step_token(std::size_t job, std::size_t step, double seconds_left);
  void step_stopped(const StepId& step);
  void end_leases(const std::string& why);
  /// `work` on the blocking pool (or here), then `then` with its answer on the engine thread.
  void off_thread(std::function<std::string()> work, std::function<void(const std::string&)> then);

  // RunObserver: every notification goes on to the host's observer; a step that stops running loses its token.
  void on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState from) override;
  void on_step_output(const RunRecord& r, const Plan& p, int job, int step, std::string_view line) override;
  void on_job_finished(const RunRecord& r, const Plan& p, int job) override;
  void on_run_finished(const RunRecord& r, const Plan& p) override;
  void on_attempt_failed(const RunRecord& r, const Plan& p, int job, int step, const StepRecord::Failure& f, bool retried) override;
  void on_health_check(const RunRecord& r, int card, const std::string& command, double seconds, const std::string& failure) override;

  RunHosting host_;
  std::string id_, run_dir_;
  std::map<std::string, std::string> base_env_;  // what every step of it starts from (handover)
  std::shared_ptr<const RunCaches> caches_;        // its named caches' tiers (caches/cache_tiers), or null
  std::map<std::string, std::string> cache_names_;  // the caches its steps name: name -> variable
  /// With reuse: each distinct `reuse.inputs` of its steps (the pin file added), whose trees are read from its
  /// worktree before it starts (reuse/result_key).
  std::set<std::vector<std::string>> reuse_globs_;
  /// The trees of reuse_globs_ in its worktree (blocking: git), by globs_text of the step's own globs.
  std::map<std::string, std::string> read_input_trees() const;
  nlohmann::json request_;
  RunObserver* observer_;
  std::unique_ptr<RunEngine> engine_;
  std::optional<RunAs> user_;
  std::map<StepId, StepToken> step_tokens_;  // of running attempts
  bool begun_ = false, given_back_ = false;
  std::function<void(HostedRun&)> on_finished_;
  std::function<void(HostedRun&)> on_handover_changed_;
  std::size_t handover_size_ = 0;  // handover_size() when it was last handed over
  std::size_t handover_size() const;
};

}  // namespace pto
