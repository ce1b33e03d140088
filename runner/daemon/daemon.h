#pragma once
// Daemon: `pto-runner serve`'s composition root. It builds the parts in the order they depend on each other,
// wires them, starts them and stops them: the state dir and what is kept there (store/run_store), the host's
// cards, queue and executors (host/host), the runs it hosts and their leases (hosting/run_host), on-call's
// notifications (notify/host_notices), bisections and control runs (bisect/host_questions), the read model and
// its refresh (daemon/model_refresh), and the API (server/api_endpoints), which reads that model and hands
// each command to its owner through the desk it is given (daemon/command_desk). It decides what happens on signals (drain,
// cancel: hosting/shutdown keeps the stopping state; SIGHUP: config/settings_reload) and never renders a GET.
// There are no locks because there is no second thread; blocking work (git, file reads, handing a worktree to
// a run's user) goes to the store's worker pools and answers through the engine thread.
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

#include "bisect/host_questions.h"
#include "config/project.h"
#include "store/run_reporter.h"
#include "hosting/shutdown.h"
#include "util/worker_pools.h"
#include "hosting/run_host.h"
#include "host/host.h"
#include "hosting/host_leases.h"
#include "notify/host_notices.h"
#include "daemon/model_refresh.h"
#include "testcases/mute_book.h"
#include "read_model/read_model.h"
#include "sandbox/sandbox_pool.h"
#include "server/access.h"
#include "server/api_endpoints.h"
#include "source/git_mirror.h"
#include "store/retention.h"
#include "store/run_store.h"
#include "store/run_history.h"

namespace boost::asio {
class io_context;
class thread_pool;
}

namespace pto {

struct DaemonOptions {
  LoadOptions load;
  std::string listen;       // overrides runner.yml
  std::string steps_listen;  // overrides runner.yml steps-listen
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
  /// recovers interrupted runs, listens. Returns "" or the error; `exit_code` then says 2 (bad settings,
  /// the state dir is another daemon's) or 3 (the host: disk, journal, port).
  std::string start(int& exit_code);
  unsigned short port() const;
  /// Where it is reachable, as bound (http[s]://ADDRESS:PORT).
  std::string url() const;
  const std::string& token_path() const { return access_.admin_token_file(); }
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
  /// SIGUSR2, just before the process leaves as a crash would: what this daemon keeps for a moment before
  /// writing it (the cards' history: RunHistory::batch_card_events) is written now.
  void hand_over();

 private:
  // Starting (daemon.cpp), each part "" or the error (exit 3), or it throws BadSettings (exit 2).
  std::string start_unguarded();
  std::string load_settings(Project& project);
  /// The tokens, and `where` it listens (runner.yml and the flags; checked here, bound by listen()).
  std::string read_tokens(const Project& project, EndpointSettings& where);
  std::string open_history_and_host();
  void host_runs(std::unique_ptr<SandboxPool> sandbox);
  void start_prober();
  std::string listen(const EndpointSettings& where);
  const std::string& state_dir() const { return cfg_.state_dir; }

  HostedRun* find_run(const std::string& id) { return runs_ ? runs_->find(id) : nullptr; }

  // Stopping (the stopping state is Shutdown's: hosting/shutdown).
  bool quiet() const;     // no run, checkout or lease of ours is active
  void close();           // the end of a stop: timers and listeners


  /// The read model is refreshed soon after a change (daemon/model_refresh).
  void view_changed() { view_.changed(); }

  boost::asio::io_context& io_;
  DaemonOptions opts_;
  RunnerConfig cfg_;
  Access access_;  // before the runs: a run forgets its tokens here when it goes
  ModelRefresh view_;  // the read model the API renders, refreshed soon after a change (daemon/model_refresh)
  std::unique_ptr<RunStore> store_;  // the state dir: its lock, the history, the reporter, mutes, retention, mirror, workers
  std::unique_ptr<Host> host_;  // cards, broker, executors, reaper, clock (host/host: wired as for `run`)
  std::unique_ptr<RunHost> runs_;  // the runs, their sandbox users, checkouts and take-over (hosting/run_host)

  std::unique_ptr<ApiEndpoints> endpoints_;  // the API, its listeners and the steps' own endpoint (server/api_endpoints)

  // Stopping: SIGTERM drains (accepted runs go on), SIGINT or a second SIGTERM cancels.
  Shutdown stop_;

  std::unique_ptr<HostNotices> notices_;  // on-call's notifications (notify/host_notices)

  std::unique_ptr<HostQuestions> questions_;  // bisections and control runs (bisect/host_questions): probes made by runs_
};

}  // namespace pto
