#pragma once
// Daemon: the host side of `pto-runner serve`. One io_context thread owns everything: the host (cards, the one
// queue, executors: host/host), the active runs, the run history (journal and records: daemon/run_history)
// and the read model the API renders (server/read_model.h, refreshed in daemon/daemon_view.cpp). The API
// (server/api) is its own type over that read model and this class's narrow HostCommands face; the daemon
// answers its commands here (leases: daemon_leases.cpp), decides what happens on signals (drain, cancel,
// reload: daemon_reload.cpp), and never renders a GET itself. Each run gets a sandbox user before it starts
// (sandbox/). There are no locks because there is no second thread; blocking work (git, file reads, handing a
// worktree to a run's user) goes to a worker pool and answers through the engine thread.
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "config/project.h"
#include "daemon/run_history.h"
#include "engine/engine.h"
#include "host/host.h"
#include "lease/lease_book.h"
#include "lease/lease_desk.h"
#include "server/access.h"
#include "server/api.h"
#include "server/host_commands.h"
#include "server/http_server.h"
#include "sandbox/sandbox_pool.h"
#include "server/read_model.h"
#include "source/git_mirror.h"

namespace boost::asio {
class io_context;
class thread_pool;
}

namespace pto {

struct DaemonOptions {
  LoadOptions load;
  std::string listen;       // overrides runner.yml
  std::string token_file;   // overrides runner.yml; when neither names one, a token is generated in the state dir
  std::string state_dir;    // overrides runner.yml
  std::string lock_dir;     // overrides runner.yml
  bool simulate = false;    // steps sleep their expected duration (the lead job stays real)
  bool rebuild_journal = false;  // move a damaged journal aside and rebuild history from the run directories
  double time_scale = 0.01;
  HttpLimits limits;
};

class Daemon : public HostCommands {
 public:
  Daemon(boost::asio::io_context& io, DaemonOptions opts);
  ~Daemon() override;
  /// Loads host settings, takes the state dir (one daemon per state dir), opens and checks the journal,
  /// recovers interrupted runs, listens. Returns "" or the error; start_exit_code() then says 2 (bad settings,
  /// the state dir is another daemon's) or 3 (the host: disk, journal, port).
  std::string start();
  int start_exit_code() const { return start_exit_; }
  unsigned short port() const;
  /// Where it is reachable, as bound (http[s]://ADDRESS:PORT).
  std::string url() const;
  const std::string& token_path() const { return token_path_; }
  /// SIGTERM: no new runs, and no leases but those of accepted runs (503 with the reason); accepted runs go on
  /// to their end, then `done(0)`. Past `shutdown-timeout-minutes` the rest is cancelled, then `done(143)`.
  /// After the last run the daemon still answers until each run finished meanwhile has been read once (its
  /// `submit` client sees the end), at most 30 s.
  void drain(std::function<void(int exit_code)> done);
  /// SIGINT or a second SIGTERM: cancels every active run; `done(exit_code)` once they have all stopped.
  void cancel_all(int exit_code, std::function<void(int exit_code)> done);
  /// SIGHUP: reads runner.yml again and applies what can change live (cards, groups, types, health, token,
  /// retention, kill grace, log cap), logging each difference; a file with errors keeps the old settings.
  /// Returns what it logged (for the tests).
  std::string reload();

  // HostCommands: what the API may ask, already checked for its caller (server/access).
  void submit_run(RunSubmission submission, const Caller& by, Reply reply) override;
  Answer cancel_run(const std::string& id, const Caller& by) override;
  Answer change_card(int card, bool drain, const std::string& reason, const Caller& by) override;
  Answer change_node(const std::string& node, bool drain, const std::string& reason, const Caller& by) override;
  void request_lease(LeaseRequest request, const Caller& by, Reply reply) override;
  Answer heartbeat_lease(const std::string& id, const Caller& by) override;
  void end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) override;
  void run_read(const std::string& id) override;
  Answer detach_client(const std::string& run, const std::string& client, bool cancel, const Caller& by) override;

 private:
  class RunReporter;  // each run's journal and observer (daemon/daemon.cpp)
  struct ActiveRun {
    std::unique_ptr<RunReporter> reporter;
    std::unique_ptr<RunEngine> engine;
    nlohmann::json request;  // jobs, ref, sha, github, source and env names (never env values: they may be secrets)
    struct StepToken {
      std::string token;
      double deadline = 0;  // host clock; 0: the step has no time bound
    };
    std::map<std::string, StepToken> step_tokens;  // of running steps, by "JOB-STEP"
  };
  friend class RunReporter;
  /// One pto-runner run per workflow run (submit --attach, daemon/daemon_attach.cpp): by key, the run, its
  /// sha and its clients, each with the jobs it asked for.
  struct AttachedRun {
    std::string run, sha;
    bool creating = true;  // the first client's run is being made (its commit fetched): later ones retry
    std::map<std::string, std::vector<std::string>> clients;
  };
  std::map<std::string, AttachedRun> attached_;
  /// A submission with `attach`: joins the key's run (200), or says to create it (nullopt), or refuses.
  std::optional<Answer> attach_to_existing(const RunSubmission& s);
  /// The first client's run was made: it is the key's run now, and `answer` gets the client's id.
  void attached_run_made(const RunSubmission& s, Answer& answer);

  std::string start_unguarded();
  /// Plans and starts a run whose definitions are loaded (in `root`, or a commit's worktree).
  Answer start_run(EngineOptions eo, const RunSubmission& s, Project project, Diagnostics diags, const std::string& peer);
  /// A run is registered: it gets its sandbox user and its tree (sandbox/run_tree), then starts; or waits
  /// for a user to be given back.
  void begin_run(const std::string& id);
  void on_run_finished(const std::string& id);
  /// Which pull request a submission is a run of ("" for none): "OWNER/REPO#N" from refs/pull/N/*, else
  /// "OWNER/REPO:HEAD_REF" from github.head_ref.
  static std::string pull_request_of(const RunSubmission& s);
  /// `supersede: pull-request`: the older active runs of `pull_request` are cancelled, naming run `id`.
  void supersede_older(const std::string& id, const std::string& pull_request);
  /// The run's user goes back once its tree is root's again; waiting runs are started.
  void return_sandbox_user(const std::string& id);
  void start_waiting_runs();
  /// An attempt of a step stopped running: its lease token is forgotten, the leases it asked for end.
  void step_stopped(const std::string& run, int job, int step);
  static std::string step_key_of(std::size_t job, std::size_t step);
  /// A granted lease ended: its cards' history and, when its client said its command failed, its cause and
  /// its cards charged (the step's engine for a step's lease; here for an operator's).
  void lease_ended(const Lease& l);
  /// A journal write for `run` failed: the run ends with an infrastructure error (not inside its transition).
  void stop_run_for_journal(const std::string& run, const std::string& why);
  void finish_shutdown(int exit_code);
  bool quiet() const;     // no run, checkout or lease of ours is active
  void check_stopped();   // draining or cancelling and quiet: finish
  Answer stopping_refusal() const;  // 503 while draining or cancelling, saying which
  void arm_retention_timer();
  void prune(bool at_start);

  // The read model (daemon/daemon_view.cpp).
  void view_changed();  // a transition: refresh the model soon (at most every 10 ms), on this thread
  void refresh_view();
  RunOverview overview_of(const std::string& id, const ActiveRun& r) const;

  boost::asio::io_context& io_;
  DaemonOptions opts_;
  RunnerConfig cfg_;
  std::string state_dir_, token_path_;
  int start_exit_ = 3;
  int state_lock_fd_ = -1;  // flock on <state-dir>/daemon.lock while this daemon runs
  std::unique_ptr<Host> host_;  // cards, broker, executors, reaper, clock (host/host: wired as for `run`)
  std::unique_ptr<RunHistory> history_;
  std::unique_ptr<LeaseBook> leases_;
  std::unique_ptr<LeaseDesk> lease_desk_;
  std::unique_ptr<class CardProber> prober_;  // with health.check: probes bad cards back into service
  std::string self_url_;  // how steps reach this daemon (PTO_RUNNER_SERVER)
  // Blocking work runs off the engine thread so no request can stall it, in two pools: reads (logs, run.json)
  // answer in milliseconds; git (checkouts that may wait minutes for the mirror's lock or a fetch, worktree
  // removals) must never keep a read waiting behind it.
  std::unique_ptr<boost::asio::thread_pool> workers_;
  std::unique_ptr<boost::asio::thread_pool> git_workers_;
  std::unique_ptr<GitMirror> mirror_;  // with runner.yml `source:`
  std::map<std::string, std::unique_ptr<ActiveRun>> active_;
  std::set<std::string> preparing_;  // run ids whose commit is being checked out
  std::unique_ptr<SandboxPool> sandbox_;  // the users steps run as; inactive (said loudly) without them
  std::deque<std::string> waiting_for_user_;  // registered runs, not started: every sandbox user is lent
  std::unique_ptr<boost::asio::steady_timer> waiting_timer_;  // retries them (users a foreground run held)

  ReadModel model_;
  Access access_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<HttpServer> steps_server_;  // loopback, plain: the steps' own, when server_ is TLS or not on loopback
  std::string listen_address_;
  unsigned short listen_port_ = 0;
  bool loopback_ = true;
  TlsFiles tls_;
  ToolchainStatus toolchain_;
  std::unique_ptr<boost::asio::steady_timer> view_timer_, view_tick_;
  bool view_refresh_pending_ = false, view_tick_armed_ = false;
  std::chrono::steady_clock::time_point view_refreshed_at_;
  std::map<int, bool> drained_seen_;  // each card's drained state at the last refresh (card history events)

  // Stopping: SIGTERM drains (accepted runs go on), SIGINT or a second SIGTERM cancels.
  std::function<void(int)> on_stopped_;
  int stop_exit_ = 0;
  bool draining_ = false, cancelling_ = false;
  std::set<std::string> unread_finished_;  // runs that ended while draining, not yet read by a client
  bool lingering_ = false;                 // the last of them was read: answering 2 s more before stopping
  std::unique_ptr<boost::asio::steady_timer> shutdown_timer_, linger_timer_, retention_timer_;
};

}  // namespace pto
