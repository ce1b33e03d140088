// The daemon's start, in the order its parts depend on each other: the host settings, the state dir (one
// daemon each), the sandbox, the tokens, where it listens, the history and the host, the leases, the prober,
// the read model, the API. Each part says "" or what is wrong (the host's fault: exit 3), or throws BadSettings
// (runner.yml's or the flags': exit 2).
#include "daemon/daemon.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "config/settings_reload.h"
#include "daemon/command_desk.h"
#include "exec/cgroup_tree.h"
#include "server/inherited_listeners.h"
#include "server/admin_token.h"
#include "util/state_paths.h"
#include "util/clock.h"

namespace fs = std::filesystem;

namespace pto {

Daemon::Daemon(boost::asio::io_context& io, DaemonOptions opts)
    : io_(io),
      opts_(std::move(opts)),
      view_(io),
      stop_(io, [this] { return quiet(); }, [this] { close(); }) {}

Daemon::~Daemon() {
  if (store_) store_->pools().join();  // before the parts their work reaches
}

namespace {
/// A part of the start refused for the host's settings (exit 2); anything else that stops it is the host's (3).
struct BadSettings : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace

std::string Daemon::start(int& exit_code) {
  exit_code = 3;
  try {
    std::string e = start_unguarded();
    if (e.empty()) exit_code = 0;
    return e;
  } catch (const BadSettings& e) {
    exit_code = 2;
    return e.what();
  } catch (const std::exception& e) {
    // A full disk or an I/O error while starting: say where, exit 3, never abort.
    return "cannot start with state dir " + state_dir() + ": " + e.what();
  }
}

std::string Daemon::start_unguarded() {
  // Every waiting task-submit client is an open connection: as many descriptors as the host allows us.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  view_.model.started = steady_now();
  view_.model.host.started = iso_now();
  Project project;
  EndpointSettings where;  // where it listens, as runner.yml and the flags say (checked here, bound by listen())
  if (std::string e = load_settings(project); !e.empty()) return e;
  std::string sandbox_error, unreachable;  // the sandbox users, and the state dir closed to them
  auto sandbox = open_daemon_sandbox(cfg_, state_dir(), cfg_.source.configured() ? "" : project.root, sandbox_error, unreachable);
  if (!unreachable.empty()) throw BadSettings(unreachable);
  if (!sandbox) return sandbox_error;
  if (std::string e = read_tokens(project, where); !e.empty()) return e;
  if (std::string e = open_history_and_host(); !e.empty()) return e;
  host_runs(std::move(sandbox));
  start_prober();
  if (CgroupTree::instance().available())
    spdlog::info("containment: every step in its own cgroup under {}", CgroupTree::instance().root());
  else
    spdlog::info("containment: process groups and a /proc sweep (no cgroup v2: {})", CgroupTree::instance().why_not());

  // The read model's fixed parts, the history it lists, and a first rendering before anyone asks.
  view_.arm({*host_, *runs_, *store_, *notices_, stop_});
  view_.describe_daemon(opts_.load.root, opts_.simulate);
  // The questions asked on its cards (bisect/): a pull request's red step also run on main, and bisections,
  // kept in the journal's file (those that were running go on after the take-over, their lost probes again).
  questions_ = std::make_unique<HostQuestions>(
      runs_->probes(), store_->mirror(), cfg_.main_ref,
      [this](const std::string& id) -> RunEngine* {
        HostedRun* run = find_run(id);
        return run ? &run->engine() : nullptr;
      },
      view_.model, [this] { view_changed(); }, [this](const Bisection& b) { notices_->bisection_done(b); });
  if (std::string e = questions_->open(journal_file(state_dir())); !e.empty()) spdlog::error("bisections are off: {}", e);
  std::string listening = listen(where);
  if (!listening.empty()) return listening;
  // What the last daemon left: runs its steps' supervisor still holds go on (hosting/run_host_adopt.cpp), the others
  // are marked interrupted, and what the supervisor held of those is stopped.
  const std::set<std::string> adopted = runs_->adopt();
  view_.model.host.supervisor.taken_over.assign(adopted.begin(), adopted.end());
  store_->history().recover(adopted);
  if (host_->supervised) host_->supervised->let_go_of_unadopted();
  store_->retention().prune(true);
  store_->history().load();
  view_.now();
  store_->retention().start();
  boost::asio::post(io_, [this] { questions_->resume(); });
  return listening;
}

std::string Daemon::load_settings(Project& project) {
  Diagnostics diags;
  project = load_project(opts_.load, diags);  // host settings now; job files again per submitted run
  const StartFindings found = split_start_findings(diags, project, opts_.load.root);
  if (!found.host.empty()) throw BadSettings("the host settings have errors:" + found.host);
  if (!found.definitions.empty() && !project.runner.source.configured())
    std::fprintf(stderr, "pto-runner serve: warning: the definitions have errors; runs are refused until they are fixed:%s\n",
                 found.definitions.c_str());
  cfg_ = project.runner;
  resolve_host_dirs(cfg_, project.root, opts_.lock_dir, opts_.state_dir);
  std::string why;
  bool theirs = false;
  store_ = RunStore::take(state_dir(), why, theirs);
  if (!store_ && theirs) throw BadSettings(why);
  if (!store_) return why;
  return "";
}

std::string Daemon::read_tokens(const Project& project, EndpointSettings& where) {
  AdminToken admin;
  bool bad_settings = false;
  if (std::string e = read_admin_token(project.root, opts_.token_file, cfg_.token_file, state_dir(), true, admin, bad_settings); !e.empty()) {
    if (bad_settings) throw BadSettings(e);
    return e;
  }
  access_.set_admin_token(admin.token, admin.path);
  // Where it listens (server/api_endpoints): a wrong address or TLS setting is runner.yml's fault.
  if (std::string e = EndpointSettings::read(cfg_, project.root, opts_.listen, opts_.steps_listen, access_, where); !e.empty())
    throw BadSettings(e);
  return "";
}

std::string Daemon::open_history_and_host() {
  RunStore::Hooks hooks;
  hooks.write_failed = [this](const std::string& run, const std::string& why) {
    if (runs_) runs_->stop_for_journal(run, why);
  };
  hooks.request_of = [this](const std::string& id) -> const nlohmann::json* {
    HostedRun* run = find_run(id);
    return run ? &run->request() : nullptr;
  };
  hooks.changed = [this] { view_changed(); };
  hooks.in_use = [this](const std::string& id) { return runs_ && runs_->holds(id); };
  hooks.paused = [this] { return stop_.cancelling(); };
  if (std::string e = store_->open(io_, cfg_, view_.model, opts_.rebuild_journal, !opts_.simulate, std::move(hooks)); !e.empty()) return e;
  std::string host_error;
  host_ = wire_host(io_, cfg_, HostOptions::daemon(state_dir(), opts_.simulate, cfg_.supervise), host_error);
  if (!host_) return host_error;
  store_->reporter().set_keep_engine_state(host_->supervised != nullptr);
  host_->set_on_change([this] { view_changed(); });
  // On-call hears of cards going bad or coming back, and of runs' red steps (notify/host_notices). Its status
  // changes on its senders' threads: the read model is refreshed on this one.
  notices_ = std::make_unique<HostNotices>(journal_file(state_dir()), [this] { return url(); },
                                           [this] { boost::asio::post(io_, [this] { view_changed(); }); });
  notices_->open(cfg_);
  store_->reporter().set_on_step_final([this](const RunRecord& r, const Plan& p, int job, int step) {
    HostedRun* run = find_run(r.id);
    if (!run) return;
    const nlohmann::json& request = run->request();
    if (!request.contains("probe"))  // a bisection's probe or a control: its own story, not on-call's
      notices_->step_final(r, p, job, step, {request.value("ref", ""), request.value("sha", ""), &run->engine().mask()});
    questions_->step_final(r, p, job, step, request);
  });  if (host_->pool)
    host_->pool->set_on_health([this](int card, CardHealth from, CardHealth to, const std::string& why) { notices_->card(card, from, to, why); });
  return "";
}

void Daemon::host_runs(std::unique_ptr<SandboxPool> sandbox) {
  RunHost::Events on;
  on.muted = [this](const std::string& test) { return store_->muted(test); };
  on.finished = [this](HostedRun& run) {
    questions_->run_finished(run.id(), run.engine().record(), run.engine().plan(), run.request().value("sha", ""));
  };
  on.cancelled = [this](const std::string& id) { questions_->run_cancelled(id); };
  on.perf_sample = [this](const std::string& run, std::size_t job, std::size_t step, const std::string& ref, const std::string& sha, int priority,
                          const std::string& against) { questions_->perf_sample(run, job, step, ref, sha, priority, against); };
  on.refresh = [this] { view_.now(); };
  on.changed = [this] { view_changed(); };
  on.after_run = [this] { store_->retention().prune(false); };
  runs_ = std::make_unique<RunHost>(RunHostParts{io_, *host_, cfg_, store_->history(), store_->reporter(), store_->pools(), store_->mirror(), stop_, view_.model, store_->results(), store_->perf()},
                                    RunDefaults{opts_.load, opts_.simulate, opts_.time_scale}, std::move(sandbox), std::move(on));
}

void Daemon::start_prober() {
  if (opts_.simulate) return;  // simulated steps break no card
  std::error_code ec;
  fs::create_directories(state_dir() + "/probes", ec);
  host_->start_prober(
      io_, cfg_.health, state_dir() + "/probes",
      [this](int card, const std::string& cmd, double seconds, const std::string& failure) {
        const double end = epoch_now();
        store_->history().card_event({card, "health-check", end - seconds, end, cmd, "", "", failure.empty() ? "passed" : "failed", failure});
        view_changed();
      },
      [this](int card) {
        spdlog::info("card {} passed {} health probes in a row: back in service", card, cfg_.health.return_after);
        view_changed();
      });
}

std::string Daemon::listen(const EndpointSettings& where) {
  // Sockets that stayed bound while no daemon ran (server/inherited_listeners): systemd's, else the ones the
  // step supervisor kept of the last daemon. Bound there only where none was given.
  InheritedListeners given;
  std::vector<std::string> problems;
  given.take_from_systemd(problems);
  for (const auto& p : problems) spdlog::warn("{}", p);
  if (host_->supervised)
    for (auto& [name, fd] : host_->supervised->take_listeners()) given.add({fd, name});
  auto desk = std::make_unique<CommandDesk>(CommandDesk::Owners{*runs_, *host_, *store_, *questions_, stop_, view_});
  endpoints_ = std::make_unique<ApiEndpoints>(io_, &store_->pools().reads, view_.model, std::move(desk), access_);
  bool config_error = false;
  if (std::string e = endpoints_->open(where, cfg_, opts_.limits, given, state_dir(), config_error); !e.empty()) {
    if (config_error) throw BadSettings(e);
    return e;
  }
  // Copies outlive this daemon in its steps' supervisor: while it restarts nothing else can bind its address.
  if (host_->supervised) host_->supervised->keep_listeners(endpoints_->sockets());
  runs_->leases().open_site(access_, endpoints_->steps_url());
  return "";
}

std::string Daemon::url() const { return endpoints_ ? endpoints_->url() : ""; }

unsigned short Daemon::port() const { return endpoints_ ? endpoints_->port() : 0; }

// SIGHUP: the daemon reads runner.yml again (config/settings_reload: what moves over, what needs a restart)
// and hands each part its settings: the token, the cards, the receivers, the mutes, the leases' kill grace,
// retention. A file with errors keeps every old setting.
std::string Daemon::reload() {
  std::string logged;
  auto say = [&](const std::string& line) {
    spdlog::info("reload: {}", line);
    logged += line + "\n";
  };
  std::string errors;
  std::optional<RunnerConfig> reread = reread_host_settings(opts_.load, opts_.lock_dir, opts_.state_dir, errors);
  if (!reread) {
    spdlog::error("reload: the host settings have errors; keeping the old ones:{}", errors);
    return "kept the old settings:" + errors + "\n";
  }
  const RunnerConfig& next = *reread;

  // The token: a configured file is read again (a rotated token takes effect now).
  std::string token_changed;
  if (std::string e = reload_admin_token(access_, opts_.load.root, opts_.token_file, next.token_file, state_dir(), token_changed); !e.empty()) {
    spdlog::error("reload: {}; keeping the old settings", e);
    return "kept the old settings: " + e + "\n";
  }
  if (!token_changed.empty()) say(token_changed);
  for (const auto& change : host_->reconfigure(next)) say(change);
  SettingsReload r = reload_settings(cfg_, next);
  for (const auto& line : r.said) say(line);
  notices_->reload(next, say);  // it compares with the receivers in force
  cfg_ = r.applied;
  runs_->leases().set_kill_grace(cfg_.kill_grace_seconds);
  store_->reconfigure(cfg_.tests);
  view_changed();
  if (logged.empty()) say("runner.yml read again: nothing changed");
  store_->retention().prune(false);
  return logged;
}

// Stopping the daemon (docs/operators.md): SIGTERM drains (accepted runs go on to their end,
// their clients read the end), SIGINT or a second SIGTERM cancels everything, SIGUSR2 hands over.
void Daemon::drain(std::function<void(int)> done) { runs_->drain(cfg_.shutdown_timeout_minutes, std::move(done)); }

void Daemon::cancel_all(int exit_code, std::function<void(int)> done) { runs_->cancel_all(exit_code, std::move(done)); }

bool Daemon::quiet() const { return !runs_ || runs_->quiet(); }

void Daemon::hand_over() {
  if (store_ && store_->opened()) store_->history().flush();
}

void Daemon::close() {
  if (store_ && store_->opened()) store_->retention().stop();
  if (runs_) runs_->stop();
  view_.stop();
  // Stopping for good (not a hand-over): the supervisor's copies of the listeners go too, so the address is free.
  if (host_ && host_->supervised) host_->supervised->forget_listeners();
  if (endpoints_) endpoints_->stop();
}

}  // namespace pto
