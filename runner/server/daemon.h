#pragma once
// Daemon: `pto-runner serve`. One io_context thread owns everything: the card pool and its one queue (shared
// by every run), the executor, the active runs, the journal and the HTTP server. The host side (daemon.cpp)
// changes that state; after each transition it refreshes a typed read model (daemon_view.cpp,
// server/host_view.h) that the API side (api.cpp) renders: a GET never runs the scheduler, opens the journal
// or reads a configuration file. There are no locks because there is no second thread; blocking work (git,
// file reads) goes to a worker pool and answers through the engine thread.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "config/project.h"
#include "engine/dispatcher.h"
#include "engine/engine.h"
#include "engine/leases.h"
#include "server/lease_service.h"
#include "host/host.h"
#include "server/host_view.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "source/git_mirror.h"
#include "store/journal.h"

#include <nlohmann/json.hpp>

#include <boost/asio/steady_timer.hpp>

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

class Daemon {
 public:
  Daemon(boost::asio::io_context& io, DaemonOptions opts);
  ~Daemon();
  /// Loads host settings, takes the state dir (one daemon per state dir), opens and checks the journal,
  /// recovers interrupted runs, listens. Returns "" or the error; start_exit_code() then says 2 (bad settings,
  /// the state dir is another daemon's) or 3 (the host: disk, journal, port).
  std::string start();
  int start_exit_code() const { return start_exit_; }
  unsigned short port() const;
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

  void handle(const HttpRequest& req, HttpServer::Respond respond);  // server/api.cpp
  struct Submission;  // a checked POST /api/v1/runs body

 private:
  class JournalObserver;
  struct ActiveRun {
    std::unique_ptr<JournalObserver> observer;  // the engine's journal and observer
    std::unique_ptr<RunEngine> engine;
    nlohmann::json request;  // jobs, ref, sha, github, source and env names (never env values: they may be secrets)
  };
  friend class JournalObserver;

  void submit(const HttpRequest& req, HttpServer::Respond respond);
  /// Plans and starts a run whose definitions are loaded (in `root`, or a commit's worktree).
  HttpResponse start_run(EngineOptions eo, const Submission& s, Project project, Diagnostics diags, const std::string& peer);
  void remove_run_dir(const std::string& run_dir);
  HttpResponse route(const HttpRequest& req);  // every request answered at once
  HttpResponse cancel(const std::string& id);
  HttpResponse status(const HttpRequest& req);
  HttpResponse drain_node(const HttpRequest& req, const std::string& node, bool drain);  // executor: slurm
  std::string status_body(bool full_queue);  // server/daemon_view.cpp
  void slurm_view(HostView& v) const;        // nodes and our steps on them (executor: slurm)
  HttpResponse page() const;                 // GET /: server/status_page.cpp
  HttpResponse runs(const HttpRequest& req);
  void run(const std::string& id, HttpServer::Respond respond);
  void step_log(const std::string& id, const std::string& step, const HttpRequest& req, HttpServer::Respond respond);
  bool authorized(const HttpRequest& req) const;
  /// For lease endpoints: the admin token, or a run's lease token. Sets `run` to that run ("" for admin).
  bool lease_authorized(const HttpRequest& req, std::string& run) const;
  void lease_request(const HttpRequest& req, HttpServer::Respond respond);  // server/lease_api.cpp
  HttpResponse lease_route(const HttpRequest& req, const std::string& id, const std::string& action);
  nlohmann::json leases_json() const;
  std::string start_unguarded();
  void recover();
  /// Opens the journal, checks it, and rebuilds it from the run directories when asked or when it is
  /// missing or empty while run directories exist. "" or the error.
  std::string open_journal();
  std::size_t rebuild_journal();
  /// A journal write failed (full disk, I/O error): logged once while it lasts; the run it was for (if any)
  /// ends with an infrastructure error. When writes work again, it says so and writes what waited.
  void journal_result(bool ok, const std::string& run_id);
  /// The run's record, kept in its run directory (run.json, written atomically) for --rebuild-journal.
  void write_run_record(const std::string& run_dir, const nlohmann::json& record);
  /// Retention: prunes runs (journal rows, run directories, worktrees) past `retention`, and worktrees past
  /// `source.keep-worktrees`; at start also run directories the journal does not know (a refused or
  /// interrupted submission). Files go on the workers.
  void prune_history(bool at_start);
  void arm_retention_timer();
  void on_run_finished(const std::string& id);
  double uptime() const;
  void finish_shutdown(int exit_code);
  /// Reads a token file: a regular file whose first line, trimmed, has 16+ characters. "" or the problem.
  static std::string read_token(const std::string& path, std::string& token);
  bool quiet() const;     // no run, checkout or lease of ours is active
  void check_stopped();   // draining or cancelling and quiet: finish
  HttpResponse stopping_refusal() const;  // 503 while draining or cancelling, saying which
  /// A finished run was read (GET of its record): a draining daemon may exit once every such run was.
  void run_read(const std::string& id);

  // The read model (server/daemon_view.cpp).
  static constexpr std::size_t kRecentRuns = 1000;  // finished runs kept in memory for GET /api/v1/runs
  void view_changed();  // a transition: refresh the model soon (at most every 100 ms), on this thread
  void refresh_view();
  RunOverview overview_of(const std::string& id, const ActiveRun& r) const;
  static RunOverview overview_of_finished(const nlohmann::json& record);
  void remember_finished(const nlohmann::json& record);
  void load_history_view();

  boost::asio::io_context& io_;
  DaemonOptions opts_;
  RunnerConfig cfg_;
  std::string state_dir_, token_path_, token_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<Host> host_;  // cards, broker, executors, reaper (host/host: wired as for `run`)
  DevicePool* pool_ = nullptr;        // host_'s
  Dispatcher* dispatcher_ = nullptr;  // host_'s
  std::unique_ptr<LeaseBook> leases_;
  std::unique_ptr<LeaseService> lease_service_;  // the lease endpoints over leases_
  std::map<std::string, std::string> lease_tokens_;  // a run's lease token -> the run (PTO_RUNNER_LEASE_TOKEN)
  std::string self_url_;                             // how steps reach this daemon (PTO_RUNNER_SERVER)
  std::unique_ptr<HttpServer> server_;
  // Blocking work runs off the engine thread so no request can stall it, in two pools: reads (logs, run.json)
  // answer in milliseconds; git (checkouts that may wait minutes for the mirror's lock or a fetch, worktree
  // removals) must never keep a read waiting behind it.
  std::unique_ptr<boost::asio::thread_pool> workers_;
  std::unique_ptr<boost::asio::thread_pool> git_workers_;
  std::unique_ptr<GitMirror> mirror_;  // with runner.yml `source:`
  std::map<std::string, std::unique_ptr<ActiveRun>> active_;
  std::set<std::string> preparing_;  // run ids whose commit is being checked out
  std::map<std::string, nlohmann::json> unjournaled_;  // finished runs the journal could not take yet
  bool journal_failing_ = false, record_failing_ = false;
  int start_exit_ = 3;
  int state_lock_fd_ = -1;  // flock on <state-dir>/daemon.lock while this daemon runs
  Metrics metrics_;
  ToolchainStatus toolchain_;
  std::string started_iso_;
  std::chrono::steady_clock::time_point started_;
  // Stopping: SIGTERM drains (accepted runs go on), SIGINT or a second SIGTERM cancels.
  std::function<void(int)> on_stopped_;
  int stop_exit_ = 0;
  bool draining_ = false, cancelling_ = false;
  std::set<std::string> unread_finished_;  // runs that ended while draining, not yet read by a client
  bool lingering_ = false;                 // the last of them was read: answering 2 s more before stopping
  std::unique_ptr<boost::asio::steady_timer> shutdown_timer_, linger_timer_, retention_timer_;

  HostView view_;
  std::map<std::string, int> runs_by_result_;  // finished runs in the journal, by state
  std::unique_ptr<boost::asio::steady_timer> view_timer_, view_tick_;
  bool view_refresh_pending_ = false, view_tick_armed_ = false;
  std::chrono::steady_clock::time_point view_refreshed_at_;
  std::string status_json_cache_;
  std::chrono::steady_clock::time_point status_json_at_;
};

}  // namespace pto
