// The daemon's start, in the order its parts depend on each other: the host settings, the state dir (one
// daemon each), the sandbox, the tokens, where it listens, the history and the host, the leases, the prober,
// the read model, the API. Each part says "" or what is wrong (the host's fault: exit 3), or throws BadSettings
// (runner.yml's or the flags': exit 2).
#include "daemon/daemon.h"
#include "supervise/supervisor.h"
#include "util/process_env.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "exec/cgroup_tree.h"
#include "sandbox/run_tree.h"
#include "server/inherited_listeners.h"
#include "store/state_dir_lock.h"
#include "util/build_commit.h"
#include "server/admin_token.h"
#include "util/state_paths.h"
#include "util/clock.h"

namespace fs = std::filesystem;

namespace pto {

Daemon::Daemon(boost::asio::io_context& io, DaemonOptions opts)
    : io_(io),
      opts_(std::move(opts)),
      view_(io, [this] { refresh_view(); }),
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
  std::unique_ptr<SandboxPool> sandbox;
  if (std::string e = open_sandbox(project, sandbox); !e.empty()) return e;
  if (std::string e = read_tokens(project, where); !e.empty()) return e;
  if (std::string e = open_history_and_host(); !e.empty()) return e;
  host_runs(std::move(sandbox));
  start_prober();
  if (CgroupTree::instance().available())
    spdlog::info("containment: every step in its own cgroup under {}", CgroupTree::instance().root());
  else
    spdlog::info("containment: process groups and a /proc sweep (no cgroup v2: {})", CgroupTree::instance().why_not());

  // The read model's fixed parts, the history it lists, and a first rendering before anyone asks.
  view_.arm();
  view_.model.host.version = PTO_RUNNER_VERSION;
  view_.model.host.commit = kBuildCommit;
  view_.model.host.simulate = opts_.simulate;
  {
    Diagnostics d;  // the pin the definitions ask for, shown until a lead job ran
    VersionsEnv pin = load_versions_env(opts_.load.root + "/toolchain/versions.env", "toolchain/versions.env", d);
    view_.model.host.pin_version = pin.ptoas_version;
    view_.model.host.pin_sha256 = pin.sha256_for(host_arch());
  }
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
  refresh_view();
  store_->retention().start();
  boost::asio::post(io_, [this] { questions_->resume(); });
  return listening;
}

std::string Daemon::load_settings(Project& project) {
  Diagnostics diags;
  project = load_project(opts_.load, diags);  // host settings now; job files again per submitted run
  // Host settings must be right to start; a broken job file only makes submissions fail (400, with the
  // findings) until it is fixed, since every submission reads the definitions again.
  std::string host_errors, definition_errors;
  for (const auto& d : diags.items()) {
    if (d.severity != Severity::Error) continue;
    bool host = d.file == project.runner.file || d.file == "(command line)" || d.file == opts_.load.root ||
                (!project.runner.env_file.empty() && d.file == project.runner.env_file);
    (host ? host_errors : definition_errors) += "\n" + format_diagnostic(d);
  }
  if (!host_errors.empty()) throw BadSettings("the host settings have errors:" + host_errors);
  if (!definition_errors.empty() && !project.runner.source.configured())
    std::fprintf(stderr, "pto-runner serve: warning: the definitions have errors; runs are refused until they are fixed:%s\n",
                 definition_errors.c_str());
  cfg_ = project.runner;
  resolve_host_dirs(cfg_, project.root, opts_.lock_dir, opts_.state_dir);
  std::string why;
  bool theirs = false;
  store_ = RunStore::take(state_dir(), why, theirs);
  if (!store_ && theirs) throw BadSettings(why);
  if (!store_) return why;
  return "";
}

std::string Daemon::open_sandbox(const Project& project, std::unique_ptr<SandboxPool>& sandbox) {
  // Steps run as sandbox users, each run's its own; they reach their run's tree through a state dir closed to
  // them otherwise (sandbox/run_tree). Without them, said loudly, here and in the status and on the page.
  sandbox = std::make_unique<SandboxPool>(cfg_.sandbox, cfg_.shared_files, cfg_.all_card_files(), cfg_.lock_dir);
  if (std::string e = close_state_dir(state_dir()); !e.empty()) return e;
  if (!sandbox->active()) {
    spdlog::warn("NO SANDBOX: pull requests' steps run as the daemon's own user (uid {}) and can reach its token, journal "
                 "and every other run: {}",
                 ::geteuid(), sandbox->why());
    return "";
  }
  if (std::string dir = unsearchable_ancestor(state_dir()); !dir.empty())
    throw BadSettings("sandbox users cannot reach the state dir " + state_dir() + ": " + dir +
                      " is not searchable by others (chmod o+x it, or give another --state-dir)");
  // Without `source:` steps run in the definitions' own tree, which they then read as their user.
  if (std::string dir = cfg_.source.configured() ? "" : unsearchable_ancestor(project.root); !dir.empty())
    throw BadSettings("sandbox users cannot reach the root " + project.root + " where steps run: " + dir +
                      " is not searchable by others (chmod o+x it)");
  spdlog::info("sandbox: {} users ({} .. {}); each run's steps run as its own", sandbox->size(), cfg_.sandbox.user(0),
               cfg_.sandbox.user(cfg_.sandbox.count - 1));
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
  HostOptions ho;
  ho.simulate = opts_.simulate;
  ho.wait_for_drained = true;  // drained cards may return: steps wait for them (`run` fails fast)
  ho.watch_outside = true;     // the status shows a card another program used free as soon as it is
  ho.slurm_instance = slurm_instance_tag(state_dir());  // it holds the state dir: what the tag left is its own
  ho.cancel_slurm_leftovers = true;
  if (cfg_.supervise) {  // under Slurm too: srun, whose end is the step's, must outlive this daemon
    ho.supervise_dir = supervisor_dir(state_dir());
    ho.self_exe = self_executable();
  }
  std::string host_error;
  host_ = wire_host(io_, cfg_, ho, host_error);
  if (!host_) return host_error;
  store_->reporter().set_keep_engine_state(host_->supervised != nullptr);
  host_->set_on_change([this] { view_changed(); });
  // On-call hears of cards going bad or coming back, and of runs' red steps (notify/host_notices). Its status
  // changes on its senders' threads: the read model is refreshed on this one.
  notices_ = std::make_unique<HostNotices>(journal_file(state_dir()), [this] { return url(); },
                                           [this] { boost::asio::post(io_, [this] { view_changed(); }); });
  notices_->open(cfg_);
  store_->reporter().set_on_step_final([this](const RunRecord& r, const Plan& p, int job, int step) {
    step_final(r, p, job, step);
    if (HostedRun* run = find_run(r.id)) questions_->step_final(r, p, job, step, run->request());
  });
  if (host_->pool)
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
  on.refresh = [this] { refresh_view(); };
  on.changed = [this] { view_changed(); };
  on.after_run = [this] { store_->retention().prune(false); };
  runs_ = std::make_unique<RunHost>(RunHostParts{io_, *host_, cfg_, store_->history(), store_->reporter(), store_->pools(), store_->mirror(), stop_, view_.model},
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
  endpoints_ = std::make_unique<ApiEndpoints>(io_, &store_->pools().reads, view_.model, *this, access_);
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

namespace {

Answer answer_of(const HostChange& c, nlohmann::json done) {
  switch (c.result) {
    case HostChange::Result::Done: return {Outcome::Ok, std::move(done)};
    case HostChange::Result::NoSuch: return Answer::error(Outcome::NotFound, c.message);
    case HostChange::Result::Refused: return Answer::error(Outcome::BadRequest, c.message);
    case HostChange::Result::WrongExecutor: return Answer::error(Outcome::Conflict, c.message);
    case HostChange::Result::Failed: return Answer::error(Outcome::Unavailable, c.message);
  }
  return Answer::error(Outcome::Unavailable, c.message);
}

}  // namespace

Answer Daemon::change_card(int card, bool drain, const std::string& reason, const Caller& by) {
  HostChange c = host_->change_card(card, drain, reason);
  if (c.result != HostChange::Result::Done) return answer_of(c, {});
  if (drain) spdlog::warn("card {} drained by request from {}: {}", card, by.peer, reason);
  else spdlog::info("card {} returned to service by request from {}", card, by.peer);
  refresh_view();  // a client's own change is in the status it reads next
  if (drain) return {Outcome::Ok, {{"card", card}, {"state", "drained"}, {"reason", reason}}};
  return {Outcome::Ok, {{"card", card}, {"state", "free"}, {"changed", c.changed}}};
}

Answer Daemon::change_node(const std::string& node, bool drain, const std::string& reason, const Caller& by) {
  HostChange c = host_->change_node(node, drain, reason);
  if (c.result != HostChange::Result::Done) return answer_of(c, {});
  spdlog::warn("Slurm node {} {} by request from {}{}", node, drain ? "drained" : "resumed", by.peer, drain ? ": " + reason : "");
  return {Outcome::Ok, {{"node", node}, {"state", drain ? "drain" : "resume"}, {"reason", drain ? reason : ""}}};
}

}  // namespace pto
