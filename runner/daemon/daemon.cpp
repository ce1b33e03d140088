// The daemon's start, in the order its parts depend on each other: the host settings, the state dir (one
// daemon each), the sandbox, the tokens, where it listens, the history and the host, the leases, the prober,
// the read model, the API. Each part says "" or what is wrong, and start_exit_ says how bad.
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
#include "util/random_hex.h"
#include "util/state_paths.h"
#include "util/token_file.h"
#include "util/clock.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

/// The admin token generated on a first start: written 0600 from its creation, never readable by others.
std::string make_token_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errno == EEXIST ? "" : "cannot create the token file " + path + ": " + std::strerror(errno);
  const std::string text = random_hex(32) + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  return ok ? "" : "cannot write the token file " + path + " (disk full?)";
}

}  // namespace

Daemon::Daemon(boost::asio::io_context& io, DaemonOptions opts)
    : io_(io), opts_(std::move(opts)), stop_(io, [this] { return quiet(); }, [this] { close(); }) {}

Daemon::~Daemon() {
  if (pools_) pools_->join();
  if (state_lock_fd_ >= 0) ::close(state_lock_fd_);
}

std::string Daemon::start() {
  try {
    return start_unguarded();
  } catch (const std::exception& e) {
    // A full disk or an I/O error while starting: say where, exit 3, never abort.
    start_exit_ = 3;
    return "cannot start with state dir " + state_dir() + ": " + e.what();
  }
}

std::string Daemon::start_unguarded() {
  // Every waiting task-submit client is an open connection: as many descriptors as the host allows us.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  model_.started = steady_now();
  model_.host.started = iso_now();
  Project project;
  EndpointSettings where;  // where it listens, as runner.yml and the flags say (checked here, bound by listen())
  if (std::string e = load_settings(project); !e.empty()) return e;
  std::unique_ptr<SandboxPool> sandbox;
  if (std::string e = open_sandbox(project, sandbox); !e.empty()) return e;
  if (std::string e = read_tokens(project, where); !e.empty()) return e;
  if (std::string e = open_history_and_host(); !e.empty()) return e;
  wire_leases();
  host_runs(std::move(sandbox));
  start_prober();
  if (CgroupTree::instance().available())
    spdlog::info("containment: every step in its own cgroup under {}", CgroupTree::instance().root());
  else
    spdlog::info("containment: process groups and a /proc sweep (no cgroup v2: {})", CgroupTree::instance().why_not());

  // The read model's fixed parts, the history it lists, and a first rendering before anyone asks.
  refresh_ = std::make_unique<ModelRefresh>(io_, [this] { refresh_view(); });
  model_.host.version = PTO_RUNNER_VERSION;
  model_.host.commit = kBuildCommit;
  model_.host.simulate = opts_.simulate;
  {
    Diagnostics d;  // the pin the definitions ask for, shown until a lead job ran
    VersionsEnv pin = load_versions_env(opts_.load.root + "/toolchain/versions.env", "toolchain/versions.env", d);
    model_.host.pin_version = pin.ptoas_version;
    model_.host.pin_sha256 = pin.sha256_for(host_arch());
  }
  // The questions asked on its cards (bisect/): a pull request's red step also run on main, and bisections,
  // kept in the journal's file (those that were running go on after the take-over, their lost probes again).
  controls_ = std::make_unique<ControlRuns>(
      runs_->probes(), mirror_.get(), cfg_.main_ref,
      [this](const std::string& id) -> RunEngine* {
        HostedRun* run = find_run(id);
        return run ? &run->engine() : nullptr;
      },
      [this] { view_changed(); });
  bisections_ = std::make_unique<Bisections>(
      runs_->probes(), mirror_.get(),
      [this](const std::string& id, nlohmann::json shown) {
        auto at = std::find_if(model_.bisections.begin(), model_.bisections.end(), [&](const nlohmann::json& b) { return b["id"] == id; });
        if (at != model_.bisections.end()) *at = std::move(shown);
        else model_.bisections.insert(model_.bisections.begin(), std::move(shown));
      },
      [this](const Bisection& b) { notices_->bisection_done(b); });
  if (std::string e = bisections_->open(journal_file(state_dir())); !e.empty()) spdlog::error("bisections are off: {}", e);
  std::string listening = listen(where);
  if (!listening.empty()) return listening;
  // What the last daemon left: runs its steps' supervisor still holds go on (hosting/run_host_adopt.cpp), the others
  // are marked interrupted, and what the supervisor held of those is stopped.
  const std::set<std::string> adopted = runs_->adopt();
  model_.host.supervisor.taken_over.assign(adopted.begin(), adopted.end());
  leases_->restore(adopted);
  history_->recover(adopted);
  if (host_->supervised) host_->supervised->let_go_of_unadopted();
  retention_->prune(true);
  history_->load();
  refresh_view();
  retention_->start();
  boost::asio::post(io_, [this] { bisections_->resume(); });
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
  if (!host_errors.empty()) {
    start_exit_ = 2;
    return "the host settings have errors:" + host_errors;
  }
  if (!definition_errors.empty() && !project.runner.source.configured())
    std::fprintf(stderr, "pto-runner serve: warning: the definitions have errors; runs are refused until they are fixed:%s\n",
                 definition_errors.c_str());
  cfg_ = project.runner;
  resolve_host_dirs(cfg_, project.root, opts_.lock_dir, opts_.state_dir);
  std::error_code dir_ec;
  fs::create_directories(state_dir(), dir_ec);
  if (dir_ec) return "cannot create the state dir " + state_dir() + ": " + dir_ec.message();

  // One daemon per state dir: a second one would "recover" the first one's live runs and kill their steps.
  std::string holder, lock_error;
  state_lock_fd_ = lock_state_dir(state_dir(), holder, lock_error);
  if (state_lock_fd_ < 0) {
    if (!lock_error.empty()) return lock_error;
    start_exit_ = 2;
    return "the state dir " + state_dir() + " belongs to another pto-runner serve (pid " + holder + ", lock " + state_dir() +
           "/daemon.lock); stop it, or give this one another --state-dir";
  }
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
  if (std::string dir = unsearchable_ancestor(state_dir()); !dir.empty()) {
    start_exit_ = 2;
    return "sandbox users cannot reach the state dir " + state_dir() + ": " + dir +
           " is not searchable by others (chmod o+x it, or give another --state-dir)";
  }
  // Without `source:` steps run in the definitions' own tree, which they then read as their user.
  if (std::string dir = cfg_.source.configured() ? "" : unsearchable_ancestor(project.root); !dir.empty()) {
    start_exit_ = 2;
    return "sandbox users cannot reach the root " + project.root + " where steps run: " + dir + " is not searchable by others (chmod o+x it)";
  }
  spdlog::info("sandbox: {} users ({} .. {}); each run's steps run as its own", sandbox->size(), cfg_.sandbox.user(0),
               cfg_.sandbox.user(cfg_.sandbox.count - 1));
  return "";
}

std::string Daemon::read_tokens(const Project& project, EndpointSettings& where) {
  // Token: the configured file, or one generated on first start and kept (0600) in the state dir.
  token_path_ = resolve_under_root(project.root, !opts_.token_file.empty() ? opts_.token_file : cfg_.token_file);
  if (token_path_.empty()) {
    token_path_ = state_dir() + "/token";
    if (std::string e = make_token_file(token_path_); !e.empty()) return e;
  }
  std::string token_error;
  std::string token = read_private_token_file(token_path_, token_error);
  if (!token_error.empty()) {
    start_exit_ = 2;
    return token_error;
  }
  access_.set_admin_token(token);

  // Where it listens (server/api_endpoints): a wrong address or TLS setting is runner.yml's fault.
  if (std::string e = EndpointSettings::read(cfg_, project.root, opts_.listen, opts_.steps_listen, access_, where); !e.empty()) {
    start_exit_ = 2;
    return e;
  }
  return "";
}

std::string Daemon::open_history_and_host() {
  pools_ = std::make_unique<WorkerPools>();
  if (cfg_.source.configured()) {
    SourceConfig src = cfg_.source;
    if (src.mirror.empty()) src.mirror = state_dir() + "/source.git";  // paths were resolved with the host dirs
    cfg_.source = src;
    mirror_ = std::make_unique<GitMirror>(src);
  }
  history_ = std::make_unique<RunHistory>(state_dir(), model_, pools_->git, mirror_.get(),
                                          [this](const std::string& run, const std::string& why) {
                                            if (runs_) runs_->stop_for_journal(run, why);
                                          });
  if (std::string e = history_->open(opts_.rebuild_journal); !e.empty()) return e;
  history_->batch_card_events(io_);
  open_tests();
  reporter_ = std::make_unique<RunReporter>(
      *history_, model_.metrics, !opts_.simulate,
      [this](const std::string& id) -> const nlohmann::json* {
        HostedRun* run = find_run(id);
        return run ? &run->request() : nullptr;
      },
      [this] { view_changed(); });
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
  reporter_->set_keep_engine_state(host_->supervised != nullptr);
  host_->set_on_change([this] { view_changed(); });
  // On-call hears of cards going bad or coming back, and of runs' red steps (notify/host_notices). Its status
  // changes on its senders' threads: the read model is refreshed on this one.
  notices_ = std::make_unique<HostNotices>(journal_file(state_dir()), [this] { return url(); },
                                           [this] { boost::asio::post(io_, [this] { view_changed(); }); });
  notices_->open(cfg_);
  reporter_->set_on_step_final([this](const RunRecord& r, const Plan& p, int job, int step) {
    step_final(r, p, job, step);
    if (HostedRun* run = find_run(r.id)) controls_->step_final(r, p, job, step, run->request());
  });
  if (host_->pool)
    host_->pool->set_on_health([this](int card, CardHealth from, CardHealth to, const std::string& why) { notices_->card(card, from, to, why); });
  return "";
}

void Daemon::wire_leases() {
  leases_ = std::make_unique<HostLeases>(HostLeases::Parts{io_, *host_, cfg_, *history_, model_.metrics, stop_},
                                         [this](const std::string& id) { return find_run(id); }, [this] { refresh_view(); },
                                         [this] { view_changed(); });
}

void Daemon::host_runs(std::unique_ptr<SandboxPool> sandbox) {
  RunHost::Events on;
  on.muted = [this](const std::string& test) { return mutes_->muted(test); };
  on.finished = [this](HostedRun& run) {
    bisections_->probe_finished(run.id(), run.engine().record(), run.engine().plan(), run.request().value("sha", ""));  // a probe's verdict
    controls_->finished(run.id(), run.engine().record(), run.engine().plan());  // a control's verdict to its pull request's step
  };
  on.cancelled = [this](const std::string& id) { controls_->cancel_of(id); };  // its end waits for them
  on.refresh = [this] { refresh_view(); };
  on.changed = [this] { view_changed(); };
  on.after_run = [this] { retention_->prune(false); };
  runs_ = std::make_unique<RunHost>(RunHostParts{io_, *host_, cfg_, *history_, *reporter_, *leases_, *pools_, mirror_.get(), stop_, model_},
                                    RunDefaults{opts_.load, opts_.simulate, opts_.time_scale}, std::move(sandbox), std::move(on));
  retention_ = std::make_unique<Retention>(
      io_, *history_, cfg_, [this](const std::string& id) { return runs_->holds(id); }, [this] { return stop_.cancelling(); },
      [this] { view_changed(); });
}

void Daemon::start_prober() {
  if (opts_.simulate) return;  // simulated steps break no card
  std::error_code ec;
  fs::create_directories(state_dir() + "/probes", ec);
  host_->start_prober(
      io_, cfg_.health, state_dir() + "/probes",
      [this](int card, const std::string& cmd, double seconds, const std::string& failure) {
        const double end = epoch_now();
        history_->card_event({card, "health-check", end - seconds, end, cmd, "", "", failure.empty() ? "passed" : "failed", failure});
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
  endpoints_ = std::make_unique<ApiEndpoints>(io_, &pools_->reads, model_, *this, access_);
  bool config_error = false;
  if (std::string e = endpoints_->open(where, cfg_, opts_.limits, given, state_dir(), config_error); !e.empty()) {
    if (config_error) start_exit_ = 2;
    return e;
  }
  // Copies outlive this daemon in its steps' supervisor: while it restarts nothing else can bind its address.
  if (host_->supervised) host_->supervised->keep_listeners(endpoints_->sockets());
  leases_->open_site(access_, endpoints_->steps_url());
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
