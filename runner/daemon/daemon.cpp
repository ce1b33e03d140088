#include "daemon/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdio>
#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "exec/cgroup_tree.h"
#include "host/card_prober.h"
#include "sandbox/run_tree.h"
#include "server/local_socket.h"
#include "report/run_view.h"
#include "util/api_paths.h"
#include "store/learned_durations.h"
#include "store/state_dir_lock.h"
#include "util/build_commit.h"
#include "util/json_text.h"
#include "util/secret_mask.h"
#include "util/random_hex.h"
#include "util/token_file.h"

#include <boost/asio/ip/address.hpp>

namespace fs = std::filesystem;

namespace pto {

/// Each run's journal (every transition, through RunHistory) and observer (the read model, the metrics, the
/// toolchain's state).
class Daemon::RunReporter : public RunObserver, public RunJournal {
 public:
  explicit RunReporter(Daemon& d) : d_(d) {}
  void step_changed(const RunRecord& r, const Plan& p, int job, int step) override {
    d_.history_->step_changed(r.id, job, step, step_to_json(r, p, job, step, 0));
  }
  void job_finished(const RunRecord& r, const Plan& p, int job) override {
    nlohmann::json record = run_to_json(r, p, "running", -1, 0);
    if (auto it = d_.active_.find(r.id); it != d_.active_.end()) record["request"] = it->second->request;
    d_.history_->job_finished(r.id, job, job_to_json(r, p, job, 0, false), record);
  }
  void on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState from) override {
    d_.view_changed();  // any transition: the read model is refreshed soon
    const StepRecord& s = r.jobs[job].steps[step];
    if (from == StepState::Running && s.state != StepState::Running) {
      d_.step_stopped(r.id, job, step);
      card_events_of_attempt(r, p, job, step);
    }
    Metrics& m = d_.model_.metrics;
    if (s.state == StepState::Running) {
      if (s.runnable_at >= 0 && s.started_at >= 0) m.wait_seconds.observe(s.started_at - s.runnable_at);
      return;
    }
    if (!is_final(s.state)) return;
    m.steps_by_result[to_string(s.state)]++;
    // What a successful run of this step took, to estimate its next run (simulated sleeps say nothing).
    if (s.state == StepState::Succeeded && !d_.opts_.simulate && p.jobs[job].steps[step].kind == StepKind::Command &&
        s.started_at >= 0 && s.finished_at >= s.started_at)
      d_.history_->record_duration(p.jobs[job].steps[step].key, s.finished_at - s.started_at, s.finished);
    if (s.started_at >= 0 && s.finished_at >= 0) m.step_seconds.observe(to_string(s.state), s.finished_at - s.started_at);
    if (p.jobs[job].lead) lead_job_ended(r, s);
  }
  void on_job_finished(const RunRecord&, const Plan&, int) override { d_.view_changed(); }
  void on_attempt_failed(const RunRecord&, const Plan&, int, int, const StepRecord::Failure& f, bool retried) override {
    Metrics& m = d_.model_.metrics;
    m.failures_by_cause[to_string(f.evidence.cause)]++;
    if (retried) m.retries_by_cause[to_string(f.evidence.cause)]++;
  }
  void on_health_check(const RunRecord& r, int card, const std::string& command, double seconds, const std::string& failure) override {
    const double end = epoch_now();
    d_.history_->card_event({card, "health-check", end - seconds, end, command, r.id, "", failure.empty() ? "passed" : "failed", failure});
  }
  void on_run_finished(const RunRecord& r, const Plan&) override {
    boost::asio::post(d_.io_, [&d = d_, id = r.id] { d.on_run_finished(id); });
  }

 private:
  /// An attempt of a step stopped: one event on each card it held (the cards page).
  void card_events_of_attempt(const RunRecord& r, const Plan& p, int job, int step) {
    const StepRecord& s = r.jobs[job].steps[step];
    if (s.cards.empty()) return;
    const double end = epoch_now();
    const double ran = s.started_at >= 0 && s.finished_at >= s.started_at ? s.finished_at - s.started_at : 0;
    std::string detail = s.error;
    if (detail.empty() && s.timed_out) detail = "timed out";
    if (detail.empty() && s.signal) detail = "signal " + std::to_string(s.signal);
    if (detail.empty() && s.exit_code >= 0) detail = "exit " + std::to_string(s.exit_code);
    // The cause it was charged to, when it failed (engine/failure_evidence).
    if (!s.failures.empty() && s.failures.back().attempt == s.attempt)
      detail = to_string(s.failures.back().evidence.cause) + ": " + s.failures.back().evidence.reason;
    // An attempt retried goes back to waiting: it failed all the same.
    const std::string result = s.state == StepState::Waiting || s.state == StepState::Pending ? "failed (retried)" : to_string(s.state);
    for (int card : s.cards)
      d_.history_->card_event({card, "step", end - ran, end, step_label(p.jobs[job], p.jobs[job].steps[step]), r.id,
                               api_path::step_id(job, step), result, detail});
  }
  void lead_job_ended(const RunRecord& r, const StepRecord& s) {
    ToolchainStatus& t = d_.toolchain_;
    t.run = r.id;
    t.last_verified = s.finished;
    if (s.state == StepState::Succeeded) {
      t.state = "ready";
      auto get = [&](const char* k) {
        auto it = r.toolchain_env.find(k);
        return it == r.toolchain_env.end() ? std::string() : it->second;
      };
      t.version = get("PTOAS_VERSION");
      t.sha256 = get("PTOAS_SHA256");
      t.root = get("PTOAS_ROOT");
      t.bin = get("PTOAS_BIN");
      t.error.clear();
    } else {
      t.state = "failed";
      t.error = "lead job " + to_string(s.state) + "; see " + s.log_path;
    }
  }
  Daemon& d_;
};

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

Daemon::Daemon(boost::asio::io_context& io, DaemonOptions opts) : io_(io), opts_(std::move(opts)) {}

Daemon::~Daemon() {
  if (git_workers_) git_workers_->join();  // a checkout in progress finishes (it is bounded by the fetch timeout)
  if (workers_) workers_->join();
  if (state_lock_fd_ >= 0) ::close(state_lock_fd_);
}

std::string Daemon::start() {
  try {
    return start_unguarded();
  } catch (const std::exception& e) {
    // A full disk or an I/O error while starting: say where, exit 3, never abort.
    start_exit_ = 3;
    return "cannot start with state dir " + state_dir_ + ": " + e.what();
  }
}

std::string Daemon::start_unguarded() {
  // Every waiting task-submit client is an open connection: as many descriptors as the host allows us.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  model_.started = std::chrono::steady_clock::now();
  model_.host.started = iso_now();
  Diagnostics diags;
  Project project = load_project(opts_.load, diags);  // host settings now; job files again per submitted run
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
  state_dir_ = cfg_.state_dir;
  std::error_code dir_ec;
  fs::create_directories(state_dir_, dir_ec);
  if (dir_ec) return "cannot create the state dir " + state_dir_ + ": " + dir_ec.message();

  // One daemon per state dir: a second one would "recover" the first one's live runs and kill their steps.
  std::string holder, lock_error;
  state_lock_fd_ = lock_state_dir(state_dir_, holder, lock_error);
  if (state_lock_fd_ < 0) {
    if (!lock_error.empty()) return lock_error;
    start_exit_ = 2;
    return "the state dir " + state_dir_ + " belongs to another pto-runner serve (pid " + holder + ", lock " + state_dir_ +
           "/daemon.lock); stop it, or give this one another --state-dir";
  }

  // Steps run as sandbox users, each run's its own; they reach their run's tree through a state dir closed to
  // them otherwise (sandbox/run_tree). Without them, said loudly, here and in the status and on the page.
  sandbox_ = std::make_unique<SandboxPool>(cfg_.sandbox, cfg_.shared_files, cfg_.all_card_files(), cfg_.lock_dir);
  if (std::string e = close_state_dir(state_dir_); !e.empty()) return e;
  if (sandbox_->active()) {
    if (std::string dir = unsearchable_ancestor(state_dir_); !dir.empty()) {
      start_exit_ = 2;
      return "sandbox users cannot reach the state dir " + state_dir_ + ": " + dir +
             " is not searchable by others (chmod o+x it, or give another --state-dir)";
    }
    // Without `source:` steps run in the definitions' own tree, which they then read as their user.
    if (std::string dir = cfg_.source.configured() ? "" : unsearchable_ancestor(project.root); !dir.empty()) {
      start_exit_ = 2;
      return "sandbox users cannot reach the root " + project.root + " where steps run: " + dir +
             " is not searchable by others (chmod o+x it)";
    }
    spdlog::info("sandbox: {} users ({} .. {}); each run's steps run as its own", sandbox_->size(), cfg_.sandbox.user(0),
                 cfg_.sandbox.user(cfg_.sandbox.count - 1));
  } else {
    spdlog::warn("NO SANDBOX: pull requests' steps run as the daemon's own user (uid {}) and can reach its token, journal "
                 "and every other run: {}",
                 ::geteuid(), sandbox_->why());
  }

  // Token: the configured file, or one generated on first start and kept (0600) in the state dir.
  token_path_ = resolve_under_root(project.root, !opts_.token_file.empty() ? opts_.token_file : cfg_.token_file);
  if (token_path_.empty()) {
    token_path_ = state_dir_ + "/token";
    if (std::string e = make_token_file(token_path_); !e.empty()) return e;
  }
  std::string token_error;
  std::string token = read_private_token_file(token_path_, token_error);
  if (!token_error.empty()) {
    start_exit_ = 2;
    return token_error;
  }
  access_.set_admin_token(token);

  // Where it listens: loopback by default. Beyond loopback every read needs a token too, and the traffic TLS
  // (or an explicit insecure-listen, said at start), as GitHub's runner or Buildkite's agent would insist on.
  std::string listen = opts_.listen.empty() ? cfg_.listen : opts_.listen;
  if (!split_listen(listen, listen_address_, listen_port_)) {
    start_exit_ = 2;
    return "bad listen address '" + listen + "' (want ADDRESS:PORT)";
  }
  boost::system::error_code addr_ec;
  const auto addr = boost::asio::ip::make_address(listen_address_, addr_ec);
  loopback_ = !addr_ec && addr.is_loopback();
  tls_ = {resolve_under_root(project.root, cfg_.tls_cert), resolve_under_root(project.root, cfg_.tls_key)};
  if (!loopback_ && !tls_.enabled() && !cfg_.insecure_listen) {
    start_exit_ = 2;
    return "listen " + listen + " is not loopback: give tls: {cert, key} in runner.yml, or insecure-listen: true to serve "
           "plain HTTP there";
  }
  if (!loopback_) {
    access_.set_reads_need_token(true);
    if (!cfg_.read_token_file.empty()) {
      std::string read_token = read_private_token_file(resolve_under_root(project.root, cfg_.read_token_file), token_error);
      if (!token_error.empty()) {
        start_exit_ = 2;
        return "read-token-file: " + token_error;
      }
      access_.set_read_token(read_token);
    }
  }

  workers_ = std::make_unique<boost::asio::thread_pool>(4);
  git_workers_ = std::make_unique<boost::asio::thread_pool>(4);
  if (cfg_.source.configured()) {
    SourceConfig src = cfg_.source;
    if (src.mirror.empty()) src.mirror = state_dir_ + "/source.git";  // paths were resolved with the host dirs
    cfg_.source = src;
    mirror_ = std::make_unique<GitMirror>(src);
  }

  history_ = std::make_unique<RunHistory>(state_dir_, model_, *git_workers_, mirror_.get(),
                                          [this](const std::string& run, const std::string& why) { stop_run_for_journal(run, why); });
  if (std::string e = history_->open(opts_.rebuild_journal); !e.empty()) return e;
  HostOptions ho;
  ho.simulate = opts_.simulate;
  ho.wait_for_drained = true;  // drained cards may return: steps wait for them (`run` fails fast)
  ho.watch_outside = true;     // the status shows a card another program used free as soon as it is
  ho.slurm_instance = slurm_instance_tag(state_dir_);  // it holds the state dir: what the tag left is its own
  ho.cancel_slurm_leftovers = true;
  std::string host_error;
  host_ = wire_host(io_, cfg_, ho, host_error);
  if (!host_) return host_error;
  history_->recover();
  prune(true);
  host_->set_on_change([this] { view_changed(); });
  // A lease's client heartbeats every second; five missed and it is gone (killed, lost): its cards come back.
  leases_ = std::make_unique<LeaseBook>(io_, host_->broker(), 5, cfg_.kill_grace_seconds);
  lease_desk_ = std::make_unique<LeaseDesk>(*leases_, *host_);
  // A run's user may open its leased cards' files while it holds them (as its steps' own: exec/card_access).
  lease_desk_->set_card_access([this](const Lease& l, bool granted) {
    const RunAs* user = sandbox_->of(l.request.run_id);
    if (!user) return;
    if (std::string e = change_lease_card_access(cfg_, l, user->uid, granted); !e.empty()) spdlog::warn("lease {}: {}", l.id, e);
  });
  // Bad cards come back after passing probes (host/card_prober), where there is a check to run.
  if (!cfg_.health.check.empty() && !host_->cluster_picks_cards() && !opts_.simulate) {
    std::error_code ec;
    fs::create_directories(state_dir_ + "/probes", ec);
    prober_ = std::make_unique<CardProber>(
        io_, *host_->pool, *host_->executor, cfg_.health, state_dir_ + "/probes",
        [this](int card, const std::string& cmd, double seconds, const std::string& failure) {
          const double end = epoch_now();
          history_->card_event({card, "health-check", end - seconds, end, cmd, "", "", failure.empty() ? "passed" : "failed", failure});
          view_changed();
        },
        [this](int card) {
          spdlog::info("card {} passed {} health probes in a row: back in service", card, cfg_.health.return_after);
          host_->dispatcher->poke();
          view_changed();
        });
    prober_->start();
  }
  lease_desk_->set_on_ended([this](const Lease& l) { lease_ended(l); });
  leases_->set_on_change([this] {
    view_changed();
    if (draining_ || cancelling_) boost::asio::post(io_, [this] { check_stopped(); });
  });
  leases_->set_on_ended([this](const std::string& how, double held) { model_.metrics.lease_seconds.observe(how, held); });
  if (CgroupTree::instance().available())
    spdlog::info("containment: every step in its own cgroup under {}", CgroupTree::instance().root());
  else
    spdlog::info("containment: process groups and a /proc sweep (no cgroup v2: {})", CgroupTree::instance().why_not());

  // The read model's fixed parts, the history it lists, and a first rendering before anyone asks.
  view_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  view_tick_ = std::make_unique<boost::asio::steady_timer>(io_);
  model_.host.version = PTO_RUNNER_VERSION;
  model_.host.commit = kBuildCommit;
  model_.host.simulate = opts_.simulate;
  {
    Diagnostics d;  // the pin the definitions ask for, shown until a lead job ran
    VersionsEnv pin = load_versions_env(opts_.load.root + "/toolchain/versions.env", "toolchain/versions.env", d);
    model_.host.pin_version = pin.ptoas_version;
    model_.host.pin_sha256 = pin.sha256_for(host_arch());
  }
  history_->load();
  refresh_view();
  arm_retention_timer();

  api_ = std::make_unique<Api>(io_, workers_.get(), model_, *this, access_);
  HttpLimits limits = opts_.limits;
  limits.max_connections_per_client = static_cast<std::size_t>(cfg_.max_connections_per_client);
  auto handler = [this](const HttpRequest& r, HttpServer::Respond respond) { api_->handle(r, std::move(respond)); };
  server_ = std::make_unique<HttpServer>(io_, handler, limits);
  if (std::string e = server_->listen(listen_address_, listen_port_, tls_); !e.empty()) return e;
  if (!cfg_.listen_unix.empty()) {
    if (std::string e = open_local_socket(*server_, access_, cfg_); !e.empty()) {
      start_exit_ = 2;
      return e;
    }
    spdlog::info("listen-unix: {}{}", cfg_.listen_unix, cfg_.submit_group.empty() ? " (root only)" : " (submitters: group " + cfg_.submit_group + ")");
  }
  if (!loopback_ && !tls_.enabled())
    spdlog::warn("insecure-listen: serving plain HTTP on {}, beyond loopback: tokens cross the network unencrypted", server_->bound());
  // Its own steps reach it on a loopback port of their own, in plain HTTP (their task-submit speaks nothing
  // else), with the same API. A harness may keep hundreds of task-submit clients waiting at once, each a
  // connection, all of one run's user: there one client's share is larger than on the public port, so a
  // local user flooding the public port does not stop the steps' leases, nor one run's clients the others'.
  HttpLimits steps_limits = limits;
  steps_limits.max_connections = std::max<std::size_t>(limits.max_connections, 4096);
  steps_limits.max_connections_per_client = std::max<std::size_t>(limits.max_connections_per_client, 1024);
  steps_server_ = std::make_unique<HttpServer>(io_, handler, steps_limits);
  if (std::string e = steps_server_->listen("127.0.0.1", 0); !e.empty()) return "the steps' own endpoint: " + e;
  self_url_ = "http://" + steps_server_->bound();
  return "";
}

std::string Daemon::url() const {
  if (!server_) return "";
  return std::string(tls_.enabled() ? "https://" : "http://") + server_->bound();
}

unsigned short Daemon::port() const { return server_ ? server_->port() : 0; }

namespace {

Answer source_refusal(const SourceResult& r, const std::string& sha) {
  switch (r.error) {
    case SourceError::BadCommit:
    case SourceError::UnknownCommit:
      return {Outcome::BadRequest, {{"error", r.message}, {"field", "sha"}, {"sha", sha}}};
    default:  // unreachable repository, busy mirror, disk: the infrastructure, not the request
      return {Outcome::Unavailable, {{"error", r.message}, {"source", true}}};
  }
}

}  // namespace

void Daemon::submit_run(RunSubmission submission, const Caller& by, Reply reply) {
  if (!server_ || draining_ || cancelling_) return reply(stopping_refusal());
  auto s = std::make_shared<RunSubmission>(std::move(submission));
  if (!s->attach.empty()) {
    // One run per workflow run: a later client of the key joins its run; the first one makes it.
    if (auto joined = attach_to_existing(*s)) return reply(std::move(*joined));
    attached_[s->attach] = {"", s->sha, true, {}};
    reply = [this, key = s->attach, reply](Answer a) {
      if (a.outcome != Outcome::Created) attached_.erase(key);  // not made: the next client makes it
      reply(std::move(a));
    };
  }
  // The daemon's own PTO_RUNNER_* variables (the token among them) never reach steps.
  EngineOptions eo = make_engine_options(opts_.load.root, state_dir_, cfg_, opts_.simulate, opts_.time_scale, InheritedEnv::AllowList);
  if (!mirror_) {
    // The definitions are read again for every run: a `git pull` of jobs/ takes effect on the next submission.
    Diagnostics diags;
    Project project = load_project(opts_.load, diags);
    return reply(start_run(std::move(eo), *s, std::move(project), std::move(diags), by.peer));
  }
  if (s->sha.empty())
    return reply({Outcome::BadRequest, {{"error", "sha is required: this daemon runs commits of " + cfg_.source.repo}, {"field", "sha"}}});
  // A run of one commit: fetch and check out into the run's own worktree, load its definitions (with the
  // host's settings, never the commit's runner.yml), then plan and start here, on the engine thread.
  const std::string src = eo.run_dir + "/src";
  preparing_.insert(eo.run_id);
  boost::asio::post(*git_workers_, [this, s, eo = std::move(eo), src, reply, host = cfg_, peer = by.peer]() mutable {
    SourceResult got = mirror_->checkout(s->sha, src);
    auto project = std::make_shared<Project>();
    auto diags = std::make_shared<Diagnostics>();
    if (got.ok()) {
      LoadOptions lo;
      lo.root = src;
      lo.host = host;
      *project = load_project(lo, *diags);
    }
    boost::asio::post(io_, [this, s, eo = std::move(eo), src, reply, peer, got, project, diags]() mutable {
      preparing_.erase(eo.run_id);
      if (draining_ || cancelling_) {  // accepted before the signal: answered, then the daemon may stop
        boost::asio::post(io_, [this] { check_stopped(); });
      }
      if (!got.ok()) {
        spdlog::warn("run refused: commit {}: {}", s->sha, got.message);
        history_->remove_run_dir(eo.run_dir);
        return reply(source_refusal(got, s->sha));
      }
      eo.root = src;
      Answer a = start_run(std::move(eo), *s, std::move(*project), std::move(*diags), peer);
      if (a.outcome != Outcome::Created) history_->remove_run_dir(src.substr(0, src.size() - 4));
      reply(std::move(a));
    });
  });
}

Answer Daemon::start_run(EngineOptions eo, const RunSubmission& s, Project project, Diagnostics diags, const std::string& peer) {
  if (draining_ || cancelling_) return stopping_refusal();
  // Planned even after load errors (as lint does) so every finding, the pool check's among them, is answered.
  // An attached run is planned with every job of its commit: later clients of its workflow run add theirs.
  Plan plan = build_plan(project, PlanOptions{s.attach.empty() ? s.jobs : std::vector<std::string>{}, ""}, diags);
  if (!diags.has_input_errors()) apply_learned_durations(plan, history_->journal());
  if (diags.has_input_errors()) {
    diags.sort();
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& d : diags.items())
      if (d.severity == Severity::Error)
        findings.push_back({{"file", d.file}, {"line", d.line}, {"col", d.col}, {"rule", d.rule}, {"message", d.message}});
    nlohmann::json body = {{"error", "the run cannot be planned"}, {"findings", findings}};
    if (!s.sha.empty()) body["sha"] = s.sha;
    return {Outcome::BadRequest, body};
  }
  for (const auto& [k, v] : s.env) eo.base_env[k] = v;  // runner -> request -> job -> step -> cards -> toolchain
  eo.mask = std::make_shared<SecretMask>();
  for (const auto& [k, v] : s.secrets) {  // the steps' environment only: never journaled, shown or logged
    eo.base_env[k] = v;
    eo.mask->add(v);
  }
  if (!s.ref.empty()) eo.base_env["PTO_RUNNER_REF"] = s.ref;
  if (!s.sha.empty()) eo.base_env["PTO_RUNNER_SHA"] = s.sha;
  eo.lead_executor = host_->lead_executor.get();
  // The run's own token for its steps' `task-submit` calls: their leases are charged to it and die with it.
  const std::string lease_token = random_hex(16);
  eo.base_env["PTO_RUNNER_SERVER"] = self_url_;
  eo.base_env["PTO_RUNNER_LEASE_TOKEN"] = lease_token;
  // Each attempt of a step its own token: its leases end with it and last at most what its timeouts leave.
  eo.step_lease_token = [this, id = eo.run_id](std::size_t job, std::size_t step, double seconds_left) {
    const std::string token = random_hex(16), key = step_key_of(job, step);
    access_.add_step_token(token, id, key);
    if (auto it = active_.find(id); it != active_.end())
      it->second->step_tokens[key] = {token, seconds_left > 0 ? host_->clock->now() + seconds_left : 0};
    return token;
  };

  auto run = std::make_unique<ActiveRun>();
  // The request is journaled without env values: they may hold secrets.
  nlohmann::json env_names = nlohmann::json::array(), secret_names = nlohmann::json::array();
  for (const auto& [k, v] : s.env) env_names.push_back(k);
  for (const auto& [k, v] : s.secrets) secret_names.push_back(k);
  run->request = {{"jobs", s.jobs}, {"ref", s.ref}, {"sha", s.sha}, {"env", env_names}};
  if (!s.secrets.empty()) run->request["secrets"] = secret_names;
  if (!s.github.is_null()) run->request["github"] = s.github;
  if (!s.submitter.is_null()) run->request["submitter"] = s.submitter;  // who may cancel it besides the admin
  // Its place among other runs (sched/queue_order): the priority of its ref; and which pull request it is.
  const auto [priority, rule] = cfg_.priority_of(s.ref);
  run->request["priority"] = {{"value", priority}, {"rule", rule.empty() ? nlohmann::json(nullptr) : nlohmann::json(rule)}};
  const std::string pull_request = pull_request_of(s);
  if (!pull_request.empty()) run->request["pull_request"] = pull_request;
  if (mirror_) run->request["source"] = {{"repo", cfg_.source.repo}, {"worktree", eo.root}};
  run->reporter = std::make_unique<RunReporter>(*this);
  const std::string id = eo.run_id;
  run->engine = std::make_unique<RunEngine>(
      EngineSeams{io_, *host_->clock, host_->broker(), *host_->executor, run->reporter.get(), run->reporter.get()}, std::move(plan),
      std::move(eo));
  if (!s.attach.empty()) {
    if (std::string unknown = run->engine->unknown_job(s.jobs); !unknown.empty())
      return Answer::error(Outcome::BadRequest, "no job '" + unknown + "' in the definitions");
    run->engine->hold_all_but(s.jobs);
    run->request["attach"] = s.attach;
  }
  nlohmann::json skeleton = run_to_json(run->engine->record(), run->engine->plan(), "running", -1, 0);
  skeleton["request"] = run->request;
  ActiveRun& r = *run;
  active_[id] = std::move(run);
  model_.active[id] = {r.engine.get(), &r.request};
  access_.add_run_token(lease_token, id);
  history_->run_created(id, r.engine->record().created, r.request, skeleton);
  spdlog::info("run {} submitted from {}: {} job(s){}", id, peer, r.engine->plan().jobs.size(), s.sha.empty() ? "" : ", sha " + s.sha);
  host_->broker().set_priority(id, priority);
  if (!pull_request.empty() && cfg_.supersede == Supersede::PullRequest) supersede_older(id, pull_request);
  begin_run(id);
  refresh_view();  // the submitter's next status shows its run
  Answer made{Outcome::Created, {{"id", id}, {"url", api_path::run(id)}, {"state", "running"}}};
  if (!s.attach.empty()) attached_run_made(s, made);
  return made;
}


void Daemon::return_sandbox_user(const std::string& id) {
  if (!sandbox_->of(id)) return start_waiting_runs();
  // What the run's user owned in its tree goes back to root first (its $GITHUB_* files may hold secret values;
  // its home what it left there): the next run lent this user must find nothing of this one.
  const std::string run_dir = state_dir_ + "/runs/" + id;
  preparing_.insert(id);  // prune leaves the directory alone meanwhile
  boost::asio::post(*git_workers_, [this, id, run_dir] {
    std::string problem = reclaim_run_tree(run_dir);
    boost::asio::post(io_, [this, id, problem] {
      preparing_.erase(id);
      if (!problem.empty()) spdlog::error("run {}: {}", id, problem);
      if (std::string swept = sandbox_->give_back(id); !swept.empty()) spdlog::warn("run {} ended: {}", id, swept);
      start_waiting_runs();
      check_stopped();
    });
  });
}

void Daemon::start_waiting_runs() {
  // In order, until one finds no user (a foreground run may hold some): the rest wait for the next return or
  // the next minute's retry.
  while (!waiting_for_user_.empty()) {
    const std::string next = waiting_for_user_.front();
    if (!active_.count(next)) {
      waiting_for_user_.pop_front();
      continue;
    }
    if (!sandbox_->lend_possible()) break;
    waiting_for_user_.pop_front();
    begin_run(next);
    if (!waiting_for_user_.empty() && waiting_for_user_.back() == next) break;  // it found none after all
  }
  if (!waiting_for_user_.empty()) {
    if (!waiting_timer_) waiting_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    waiting_timer_->expires_after(std::chrono::seconds(5));
    waiting_timer_->async_wait([this](boost::system::error_code ec) {
      if (!ec) start_waiting_runs();
    });
  }
  view_changed();
}

void Daemon::begin_run(const std::string& id) {
  ActiveRun& r = *active_.at(id);
  const std::string run_dir = state_dir_ + "/runs/" + id;
  if (!sandbox_->active()) {
    if (std::string e = prepare_run_tree(run_dir, nullptr); !e.empty()) spdlog::warn("run {}: {}", id, e);
    r.engine->start();
    return;
  }
  std::optional<RunAs> user = sandbox_->lend(id);
  if (!user) {
    waiting_for_user_.push_back(id);
    spdlog::info("run {} waits: no free sandbox user ({} lent)", id, sandbox_->size());
    return;
  }
  r.engine->run_as(*user);
  // The worktree may hold thousands of files to hand to the user: off the engine thread.
  preparing_.insert(id);
  boost::asio::post(*git_workers_, [this, id, run_dir, user = *user] {
    std::string problem = prepare_run_tree(run_dir, &user);
    boost::asio::post(io_, [this, id, problem] {
      preparing_.erase(id);
      auto it = active_.find(id);
      if (it == active_.end()) return;
      RunEngine& e = *it->second->engine;
      e.start();
      if (!problem.empty()) e.abort("the run's directory could not be given to its sandbox user: " + problem);
    });
  });
}

void Daemon::stop_run_for_journal(const std::string& run_id, const std::string& why) {
  // Not from inside the engine's own transition: the next turn of the loop ends the run.
  boost::asio::post(io_, [this, run_id, why] {
    auto it = active_.find(run_id);
    if (it == active_.end() || it->second->engine->finished()) return;
    it->second->engine->abort("the journal " + state_dir_ + "/journal.sqlite cannot be written (" + why +
                              "): the run was stopped, its record may be incomplete");
    leases_->end_run(run_id, "its run was stopped by a journal failure");
  });
}

Answer Daemon::cancel_run(const std::string& id, const Caller& by) {
  auto it = active_.find(id);
  if (it == active_.end()) {
    for (const auto& r : model_.host.recent)
      if (r.id == id) return Answer::error(Outcome::Conflict, "run " + id + " has already finished");
    return Answer::error(Outcome::NotFound, "no run " + id);
  }
  it->second->engine->cancel(0);
  if (auto w = std::find(waiting_for_user_.begin(), waiting_for_user_.end(), id); w != waiting_for_user_.end()) {
    waiting_for_user_.erase(w);
    it->second->engine->start();  // everything is cancelled already: it ends at once
  }
  leases_->end_run(id, "its run was cancelled");  // the harness's leased commands stop with the run's steps
  spdlog::info("run {}: cancel requested from {}", id, by.peer);
  refresh_view();
  return {Outcome::Accepted, {{"id", id}, {"state", "cancelling"}}};
}

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


void Daemon::on_run_finished(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  for (auto a = attached_.begin(); a != attached_.end();) a = a->second.run == id ? attached_.erase(a) : std::next(a);
  view_changed();
  host_->broker().forget(id);  // its card-time competes with nobody any more
  RunEngine& e = *it->second->engine;
  int result = to_int(e.result());
  std::string state = run_state_name(e.record(), true, result);
  nlohmann::json record = run_to_json(e.record(), e.plan(), state, result, e.now());
  record["request"] = it->second->request;
  history_->run_finished(id, state, result, record);
  if (draining_ && !cancelling_) unread_finished_.insert(id);  // a drain lets its client see the end
  spdlog::info("run {} {} (exit {})", id, state, result);
  model_.active.erase(id);
  active_.erase(it);
  leases_->end_run(id, "its run ended");
  access_.forget_run(id);
  return_sandbox_user(id);
  prune(false);
  refresh_view();  // whoever saw the run end reads a status where it has ended (cards free, counts updated)
  check_stopped();
}

void Daemon::prune(bool at_start) {
  history_->prune(cfg_.retention, cfg_.source.keep_worktrees, at_start,
                  [this](const std::string& id) { return active_.count(id) > 0 || preparing_.count(id) > 0; });
  view_changed();
}

void Daemon::arm_retention_timer() {
  // Besides at start and after each run: hourly, so max-age-days holds on an idle host too.
  if (!retention_timer_) retention_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  retention_timer_->expires_after(std::chrono::hours(1));
  retention_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || cancelling_) return;
    prune(false);
    arm_retention_timer();
  });
}

Answer Daemon::stopping_refusal() const {
  return Answer::error(Outcome::Unavailable,
                       draining_ ? "the daemon is draining (SIGTERM): runs already accepted go on to their end, "
                                   "no new runs or leases are accepted; submit to the host that replaces it"
                                 : "the daemon is stopping (SIGINT): its runs are being cancelled");
}

void Daemon::drain(std::function<void(int)> done) {
  if (draining_ || cancelling_) return;
  draining_ = true;
  on_stopped_ = std::move(done);
  view_changed();
  const double minutes = cfg_.shutdown_timeout_minutes;
  spdlog::warn("SIGTERM: draining: {} active run(s) go on to their end (at most {} min, shutdown-timeout-minutes); "
               "no new runs or leases; SIGTERM again or SIGINT cancels them",
               active_.size(), minutes);
  if (quiet()) return finish_shutdown(0);
  shutdown_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  shutdown_timer_->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(minutes * 60)));
  shutdown_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || quiet()) return;
    spdlog::warn("shutdown-timeout-minutes passed with {} run(s) still active: cancelling them", active_.size());
    cancel_all(143, std::move(on_stopped_));
  });
}

void Daemon::cancel_all(int exit_code, std::function<void(int)> done) {
  if (done) on_stopped_ = std::move(done);
  if (cancelling_) return;
  cancelling_ = true;
  stop_exit_ = exit_code;
  if (shutdown_timer_) shutdown_timer_->cancel();
  view_changed();
  if (quiet()) return finish_shutdown(exit_code);
  spdlog::warn("cancelling {} active run(s) and {} lease(s)", active_.size(), leases_->active().size());
  for (auto& [id, run] : active_) run->engine->cancel(SIGTERM);
  leases_->end_all("the daemon is shutting down");
  check_stopped();
}

bool Daemon::quiet() const {
  // Nothing of ours runs: no run, no submission being checked out, no lease holding cards (an operator's
  // lease's command would otherwise outlive the daemon's flock on its card).
  return active_.empty() && preparing_.empty() && leases_->granted_count() == 0 && leases_->active().empty();
}

void Daemon::check_stopped() {
  if ((draining_ || cancelling_) && quiet()) boost::asio::post(io_, [this] { finish_shutdown(cancelling_ ? stop_exit_ : 0); });
}

void Daemon::finish_shutdown(int exit_code) {
  if (!on_stopped_) return;
  if (cancelling_) {  // SIGINT, a second SIGTERM: stop now
    unread_finished_.clear();
    lingering_ = false;
  }
  // Draining, clients following a run that ended meanwhile read it once more; wait for that (at most 30 s),
  // so a `submit` sees the end of its run rather than a lost server.
  if (!unread_finished_.empty() && !linger_timer_) {
    linger_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    linger_timer_->expires_after(std::chrono::seconds(30));
    linger_timer_->async_wait([this, exit_code](boost::system::error_code ec) {
      if (ec) return;
      unread_finished_.clear();
      finish_shutdown(exit_code);
    });
    return;
  }
  // A client read the last of them moments ago: its answer (and the log tails it fetches next) are still
  // on their way; the 2 s timer of run_read calls back here.
  if (!unread_finished_.empty() || lingering_) return;
  if (linger_timer_) linger_timer_->cancel();
  if (retention_timer_) retention_timer_->cancel();
  if (waiting_timer_) waiting_timer_->cancel();
  if (view_timer_) view_timer_->cancel();
  if (view_tick_) view_tick_->cancel();
  if (server_) server_->stop();
  if (steps_server_) steps_server_->stop();
  boost::asio::post(io_, [done = std::exchange(on_stopped_, nullptr), exit_code] { done(exit_code); });
}

void Daemon::run_read(const std::string& id) {
  if (!unread_finished_.erase(id) || !unread_finished_.empty() || !quiet()) return;
  // The answer being read is still on its way, and a `submit` goes on to fetch failed steps' log tails:
  // keep answering for 2 s more, then stop.
  lingering_ = true;
  if (!linger_timer_) linger_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  linger_timer_->expires_after(std::chrono::seconds(2));
  linger_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    lingering_ = false;
    finish_shutdown(cancelling_ ? stop_exit_ : 0);
  });
}

}  // namespace pto
