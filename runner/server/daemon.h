#pragma once
// Daemon: `pto-runner serve`. One io_context thread owns everything: the card pool and its one queue (shared
// by every run), the executor, the active runs, the journal and the HTTP server. HTTP handlers read that
// state directly; there are no locks because there is no second thread.
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
#include "exec/child_reaper.h"
#include "exec/executor.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "source/git_mirror.h"
#include "store/journal.h"

#include <nlohmann/json.hpp>

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

struct ToolchainStatus {
  std::string state = "unknown";  // unknown | ready | failed
  std::string version, sha256, root, bin, last_verified, error, run;
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
  /// Cancels every active run; `done` is posted once they have all stopped.
  void shutdown(std::function<void()> done);

  void handle(const HttpRequest& req, HttpServer::Respond respond);  // server/api.cpp
  struct Submission;  // a checked POST /api/v1/runs body

 private:
  class JournalObserver;
  struct ActiveRun {
    std::unique_ptr<RunObserver> observer;
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
  nlohmann::json render_status(bool full_queue);
  HttpResponse runs(const HttpRequest& req);
  HttpResponse run(const std::string& id);
  void step_log(const std::string& id, const std::string& step, const HttpRequest& req, HttpServer::Respond respond);
  HttpResponse metrics();
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
  void on_run_finished(const std::string& id);
  double uptime() const;

  boost::asio::io_context& io_;
  DaemonOptions opts_;
  RunnerConfig cfg_;
  std::string state_dir_, token_path_, token_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<LeaseBook> leases_;
  std::map<std::string, std::string> lease_tokens_;  // a run's lease token -> the run (PTO_RUNNER_LEASE_TOKEN)
  std::string self_url_;                             // how steps reach this daemon (PTO_RUNNER_SERVER)
  std::unique_ptr<Executor> executor_, lead_executor_;
  std::unique_ptr<HttpServer> server_;
  // Blocking work (git, log reads) runs here so no request can stall the engine thread.
  std::unique_ptr<boost::asio::thread_pool> workers_;
  std::unique_ptr<GitMirror> mirror_;  // with runner.yml `source:`
  std::unique_ptr<OrphanReaper> reaper_;  // this daemon is a subreaper: what steps orphan is reaped here
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
  std::function<void()> on_drained_;
  bool shutting_down_ = false;
  // The rendered status, reused for 100 ms: hundreds of pollers then cost one rendering per 100 ms.
  std::string status_cache_;
  std::chrono::steady_clock::time_point status_cached_at_;
};

}  // namespace pto
