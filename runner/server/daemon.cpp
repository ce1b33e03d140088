#include "server/daemon.h"
#include "slurm/slurm_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include <spdlog/spdlog.h>

#include "exec/cgroup_tree.h"
#include "exec/process_sweep.h"
#include "report/run_view.h"
#include "sched/device_pool.h"
#include "store/learned_durations.h"
#include "store/state_dir_lock.h"
#include "util/build_commit.h"
#include "util/json_text.h"
#include "util/random_hex.h"
#include "util/regular_file.h"

namespace fs = std::filesystem;

namespace pto {

/// Journals every transition and keeps the daemon's metrics and toolchain state current.
class Daemon::JournalObserver : public RunObserver, public RunJournal {
 public:
  JournalObserver(Daemon& d) : d_(d) {}
  void step_changed(const RunRecord& r, const Plan& p, int job, int step) override {
    if (d_.journal_) d_.journal_result(d_.journal_->event(r.id, "step", job, step, step_to_json(r, p, job, step, 0)), r.id);
  }
  void on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState) override {
    d_.view_changed();  // any transition: the read model is refreshed soon
    const StepRecord& s = r.jobs[job].steps[step];
    if (s.state == StepState::Running) {
      if (s.runnable_at >= 0 && s.started_at >= 0) d_.metrics_.wait_seconds.observe(s.started_at - s.runnable_at);
      return;
    }
    if (!is_final(s.state)) return;
    d_.metrics_.steps_by_result[to_string(s.state)]++;
    // What a successful run of this step took, to estimate its next run (simulated sleeps say nothing).
    if (s.state == StepState::Succeeded && !d_.opts_.simulate && p.jobs[job].steps[step].kind == StepKind::Command &&
        s.started_at >= 0 && s.finished_at >= s.started_at && d_.journal_)
      d_.journal_result(d_.journal_->record_duration(p.jobs[job].steps[step].key, s.finished_at - s.started_at, s.finished), "");
    if (s.started_at >= 0 && s.finished_at >= 0) d_.metrics_.step_seconds.observe(to_string(s.state), s.finished_at - s.started_at);
    if (p.jobs[job].lead && s.state != StepState::Running) {
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
  }
  void job_finished(const RunRecord& r, const Plan& p, int job) override {
    if (!d_.journal_) return;
    d_.journal_result(d_.journal_->event(r.id, "job", job, -1, job_to_json(r, p, job, 0, false)), r.id);
    // Each job's end is kept beside the run's logs too, so the history survives a lost journal.
    if (auto it = d_.active_.find(r.id); it != d_.active_.end()) {
      nlohmann::json record = run_to_json(r, p, "running", -1, 0);
      record["request"] = it->second->request;
      d_.write_run_record(d_.state_dir_ + "/runs/" + r.id, record);
    }
  }
  void on_job_finished(const RunRecord&, const Plan&, int) override { d_.view_changed(); }
  void on_run_finished(const RunRecord& r, const Plan&) override {
    boost::asio::post(d_.io_, [&d = d_, id = r.id] { d.on_run_finished(id); });
  }

 private:
  Daemon& d_;
};

Daemon::Daemon(boost::asio::io_context& io, DaemonOptions opts) : io_(io), opts_(std::move(opts)) {}
Daemon::~Daemon() {
  if (git_workers_) git_workers_->join();  // a checkout in progress finishes (it is bounded by the fetch timeout)
  if (workers_) workers_->join();
  if (state_lock_fd_ >= 0) ::close(state_lock_fd_);
}

double Daemon::uptime() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
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
  started_ = std::chrono::steady_clock::now();
  started_iso_ = iso_now();
  Diagnostics diags;
  Project project = load_project(opts_.load, diags);  // host settings now; job files again per submitted run
  // Host settings must be right to start; a broken job file only makes submissions fail (400, with the
  // findings) until it is fixed, since every submission reads the definitions again.
  std::string host_errors, definition_errors;
  for (const auto& d : diags.items()) {
    if (d.severity != Severity::Error) continue;
    bool host = d.file == project.runner.file || d.file == "(command line)" || d.file == opts_.load.root;
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

  // Token: the configured file, or one generated on first start and kept (0600) in the state dir.
  token_path_ = resolve_under_root(project.root, !opts_.token_file.empty() ? opts_.token_file : cfg_.token_file);
  if (token_path_.empty()) {
    token_path_ = state_dir_ + "/token";
    if (!fs::exists(token_path_)) {
      std::ofstream out(token_path_);
      out << random_hex(32) << "\n";
      out.close();
      if (!out) return "cannot write the token file " + token_path_ + " (disk full?)";
      ::chmod(token_path_.c_str(), 0600);
    }
  }
  if (std::string e = read_token(token_path_, token_); !e.empty()) {
    start_exit_ = 2;
    return e;
  }

  workers_ = std::make_unique<boost::asio::thread_pool>(4);
  git_workers_ = std::make_unique<boost::asio::thread_pool>(4);
  if (cfg_.source.configured()) {
    SourceConfig src = cfg_.source;
    if (src.mirror.empty()) src.mirror = state_dir_ + "/source.git";  // paths were resolved with the host dirs
    cfg_.source = src;
    mirror_ = std::make_unique<GitMirror>(src);
  }

  if (std::string e = open_journal(); !e.empty()) return e;
  HostOptions ho;
  ho.simulate = opts_.simulate;
  ho.wait_for_drained = true;  // drained cards may return: steps wait for them (`run` fails fast)
  ho.slurm_instance = slurm_instance_tag(state_dir_);  // it holds the state dir: what the tag left is its own
  ho.cancel_slurm_leftovers = true;
  std::string host_error;
  host_ = wire_host(io_, cfg_, ho, host_error);
  if (!host_) return host_error;
  pool_ = host_->pool.get();
  dispatcher_ = host_->dispatcher.get();
  recover();
  prune_history(true);
  dispatcher_->set_on_change([this] { view_changed(); });
  if (host_->slurm) host_->slurm->set_on_change([this] { view_changed(); });
  // A lease's client heartbeats every second; five missed and it is gone (killed, lost): its cards come back.
  leases_ = std::make_unique<LeaseBook>(io_, host_->broker(), 5, cfg_.kill_grace_seconds);
  // Accepted runs may still lease while the daemon drains; nothing else may.
  lease_service_ = std::make_unique<LeaseService>(*leases_, *host_, [this](const std::string& run) -> std::optional<HttpResponse> {
    if (!server_ || cancelling_ || (draining_ && (run.empty() || !active_.count(run)))) return stopping_refusal();
    return std::nullopt;
  });
  leases_->set_on_change([this] {
    view_changed();
    if (draining_ || cancelling_) boost::asio::post(io_, [this] { check_stopped(); });
  });
  leases_->set_on_ended([this](const std::string& how, double held) { metrics_.lease_seconds.observe(how, held); });
  if (CgroupTree::instance().available())
    spdlog::info("containment: every step in its own cgroup under {}", CgroupTree::instance().root());
  else
    spdlog::info("containment: process groups and a /proc sweep (no cgroup v2: {})", CgroupTree::instance().why_not());

  // The read model's fixed parts, the history it lists, and a first rendering before anyone asks.
  view_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  view_tick_ = std::make_unique<boost::asio::steady_timer>(io_);
  view_.version = PTO_RUNNER_VERSION;
  view_.commit = kBuildCommit;
  view_.started = started_iso_;
  view_.simulate = opts_.simulate;
  {
    Diagnostics d;  // the pin the definitions ask for, shown until a lead job ran
    VersionsEnv pin = load_versions_env(opts_.load.root + "/toolchain/versions.env", "toolchain/versions.env", d);
    view_.pin_version = pin.ptoas_version;
    view_.pin_sha256 = pin.sha256_for(host_arch());
  }
  load_history_view();
  refresh_view();
  arm_retention_timer();

  std::string address;
  unsigned short port = 0;
  std::string listen = opts_.listen.empty() ? cfg_.listen : opts_.listen;
  if (!split_listen(listen, address, port)) return "bad listen address '" + listen + "' (want ADDRESS:PORT)";
  server_ = std::make_unique<HttpServer>(
      io_, [this](const HttpRequest& r, HttpServer::Respond respond) { handle(r, std::move(respond)); }, opts_.limits);
  if (std::string e = server_->listen(address, port); !e.empty()) return e;
  self_url_ = "http://" + std::string(address == "0.0.0.0" || address == "::" ? "127.0.0.1" : address) + ":" +
              std::to_string(server_->port());
  return "";
}

std::string Daemon::read_token(const std::string& path, std::string& token) {
  std::string text, error;
  if (!read_regular_file(path, 4096, text, error)) return "token file: " + error;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return "token file " + path + " is empty";
  std::string t = text.substr(0, text.find('\n'));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.size() < 16) return "token file " + path + " holds fewer than 16 characters";
  token = t;
  return "";
}

unsigned short Daemon::port() const { return server_ ? server_->port() : 0; }

// After a crash: every run the journal never saw finish is marked interrupted. Its running steps become
// `interrupted` and their processes (found by the run's marker prefix) are killed; its waiting and pending
// steps become `cancelled`. Runs are not resumed: a resubmission is an explicit decision (GitHub re-run).
// Cards need nothing: the dead daemon's flocks died with it.
void Daemon::recover() {
  for (auto run : journal_->unfinished_runs()) {
    std::string id = run.value("id", "");
    if (id.empty()) continue;
    int killed = 0;
    for (int pid : find_processes_with_mark_prefix(id + "/"))
      if (::kill(pid, SIGKILL) == 0) ++killed;
    std::string now = iso_now();
    for (auto& job : run["jobs"]) {
      for (auto& step : job["steps"]) {
        std::string st = step.value("state", "pending");
        if (st == "running") step["state"] = "interrupted";
        else if (st == "waiting" || st == "pending") step["state"] = "cancelled";
        else continue;
        step["finished"] = now;
      }
      std::string js = job.value("state", "pending");
      if (js == "running" || js == "pending") {
        job["state"] = "cancelled";
        job["reason"] = "the daemon stopped while this run was active";
        job["finished"] = now;
      }
    }
    run["state"] = "interrupted";
    run["finished"] = now;
    run["result"] = to_int(ExitCode::Infrastructure);
    run["recovered"] = {{"at", now}, {"processes_killed", killed}};
    journal_->run_finished(id, "interrupted", to_int(ExitCode::Infrastructure), run);
    spdlog::warn("recovered run {}: it was active when the daemon stopped; marked interrupted, {} leftover process(es) killed",
                 id, killed);
  }
}

struct Daemon::Submission {
  std::vector<std::string> jobs;
  std::string ref, sha;
  std::map<std::string, std::string> env;
  nlohmann::json github;  // where the submission came from in GitHub Actions, with run_url
};

namespace {

HttpResponse bad_request(const std::string& field, const std::string& why) {
  return {400, "application/json", dump_json({{"error", why}, {"field", field}}), {}};
}

bool matches(const std::string& s, const char* pattern) { return std::regex_match(s, std::regex(pattern)); }

// The body of POST /api/v1/runs, checked field by field; every refusal names its field.
std::optional<HttpResponse> parse_submission(const std::string& text, Daemon::Submission& s) {
  nlohmann::json body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (body.is_discarded()) return bad_request("", "the body is not valid JSON");
  if (!body.is_object()) return bad_request("", "the body must be a JSON object {\"jobs\": [...], \"ref\", \"sha\", \"env\", \"github\"}");
  for (const auto& [k, v] : body.items())
    if (k != "jobs" && k != "ref" && k != "sha" && k != "env" && k != "github") return bad_request(k, "unknown field '" + k + "'");
  if (body.contains("jobs")) {
    if (!body["jobs"].is_array()) return bad_request("jobs", "jobs must be a list of job names");
    for (const auto& j : body["jobs"]) {
      if (!j.is_string()) return bad_request("jobs", "jobs must be a list of job names");
      s.jobs.push_back(j.get<std::string>());
    }
  }
  for (const char* f : {"ref", "sha"})
    if (body.contains(f) && !body[f].is_string()) return bad_request(f, std::string(f) + " must be a string");
  s.ref = body.value("ref", "");
  s.sha = body.value("sha", "");
  if (body.contains("env")) {
    if (!body["env"].is_object()) return bad_request("env", "env must be an object of NAME: \"value\"");
    for (const auto& [k, v] : body["env"].items()) {
      if (!matches(k, "[A-Za-z_][A-Za-z0-9_]*") || !v.is_string())
        return bad_request("env." + k, "env entries are NAME: \"value\" with NAME like [A-Za-z_][A-Za-z0-9_]*");
      s.env[k] = v.get<std::string>();
    }
  }
  if (body.contains("github")) {
    // Only shown and linked, never run; still checked so the status page links where it says.
    static const std::map<std::string, const char*> fields = {
        {"repository", "[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}"}, {"run_id", "[0-9]{1,20}"},
        {"run_attempt", "[0-9]{1,6}"}, {"server_url", "https?://[A-Za-z0-9.:-]{1,200}"},
        {"workflow", "[^\\x00-\\x1f]{0,200}"}, {"event_name", "[a-z_]{1,50}"}, {"actor", "[A-Za-z0-9_.\\[\\]-]{1,100}"}};
    if (!body["github"].is_object()) return bad_request("github", "github must be an object");
    s.github = nlohmann::json::object();
    for (const auto& [k, v] : body["github"].items()) {
      auto it = fields.find(k);
      if (it == fields.end()) return bad_request("github." + k, "unknown field 'github." + k + "'");
      if (!v.is_string() || !matches(v.get<std::string>(), it->second))
        return bad_request("github." + k, "github." + k + " must be a string like " + it->second);
      s.github[k] = v;
    }
    if (s.github.contains("server_url") && s.github.contains("repository") && s.github.contains("run_id"))
      s.github["run_url"] = s.github["server_url"].get<std::string>() + "/" + s.github["repository"].get<std::string>() +
                            "/actions/runs/" + s.github["run_id"].get<std::string>();
  }
  return std::nullopt;
}

HttpResponse source_refusal(const SourceResult& r, const std::string& sha) {
  switch (r.error) {
    case SourceError::BadCommit:
    case SourceError::UnknownCommit:
      return {400, "application/json", dump_json({{"error", r.message}, {"field", "sha"}, {"sha", sha}}), {}};
    default:  // unreachable repository, busy mirror, disk: the infrastructure, not the request
      return {503, "application/json", dump_json({{"error", r.message}, {"source", true}}), {}};
  }
}

}  // namespace

void Daemon::submit(const HttpRequest& req, HttpServer::Respond respond) {
  auto s = std::make_shared<Submission>();
  if (auto refused = parse_submission(req.body, *s)) return respond(*refused);
  if (!server_ || draining_ || cancelling_) return respond(stopping_refusal());
  // The daemon's own PTO_RUNNER_* variables (the token among them) never reach steps.
  EngineOptions eo = make_engine_options(opts_.load.root, state_dir_, cfg_, opts_.simulate, opts_.time_scale, "PTO_RUNNER_");
  if (!mirror_) {
    // The definitions are read again for every run: a `git pull` of jobs/ takes effect on the next submission.
    Diagnostics diags;
    Project project = load_project(opts_.load, diags);
    return respond(start_run(std::move(eo), *s, std::move(project), std::move(diags), req.peer));
  }
  if (s->sha.empty()) return respond(bad_request("sha", "sha is required: this daemon runs commits of " + cfg_.source.repo));
  // A run of one commit: fetch and check out into the run's own worktree, load its definitions (with the
  // host's settings, never the commit's runner.yml), then plan and start here, on the engine thread.
  const std::string src = eo.run_dir + "/src";
  preparing_.insert(eo.run_id);
  boost::asio::post(*git_workers_, [this, s, eo = std::move(eo), src, respond, host = cfg_, peer = req.peer]() mutable {
    SourceResult got = mirror_->checkout(s->sha, src);
    auto project = std::make_shared<Project>();
    auto diags = std::make_shared<Diagnostics>();
    if (got.ok()) {
      LoadOptions lo;
      lo.root = src;
      lo.host = host;
      *project = load_project(lo, *diags);
    }
    boost::asio::post(io_, [this, s, eo = std::move(eo), src, respond, peer, got, project, diags]() mutable {
      preparing_.erase(eo.run_id);
      if (draining_ || cancelling_) {  // accepted before the signal: answered, then the daemon may stop
        boost::asio::post(io_, [this] { check_stopped(); });
      }
      if (!got.ok()) {
        spdlog::warn("run refused: commit {}: {}", s->sha, got.message);
        remove_run_dir(eo.run_dir);
        return respond(source_refusal(got, s->sha));
      }
      eo.root = src;
      HttpResponse r = start_run(std::move(eo), *s, std::move(*project), std::move(*diags), peer);
      if (r.status != 201) remove_run_dir(src.substr(0, src.size() - 4));
      respond(std::move(r));
    });
  });
}

void Daemon::prune_history(bool at_start) {
  const RetentionConfig& r = cfg_.retention;
  std::string cutoff;
  if (r.max_age_days > 0)
    cutoff = iso_time(std::chrono::system_clock::now() -
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(r.max_age_days * 86400)));
  std::vector<std::string> pruned;
  try {
    pruned = journal_->prune(r.max_runs, cutoff);
  } catch (const std::exception& e) {
    spdlog::warn("retention: cannot prune the journal now: {}", e.what());
  }
  for (const auto& id : pruned) remove_run_dir(state_dir_ + "/runs/" + id);
  if (!pruned.empty() && !at_start) {
    std::set<std::string> gone(pruned.begin(), pruned.end());
    for (auto it = view_.recent.begin(); it != view_.recent.end();) it = gone.count(it->id) ? view_.recent.erase(it) : std::next(it);
    runs_by_result_ = journal_->runs_by_state();
    runs_by_result_.erase("running");
    view_changed();
  }
  if (!pruned.empty()) spdlog::info("retention: pruned {} finished run(s) (max-runs {}, max-age-days {})", pruned.size(), r.max_runs, r.max_age_days);
  if (mirror_) {
    std::vector<std::string> old = journal_->finished_runs_after(cfg_.source.keep_worktrees);
    boost::asio::post(*git_workers_, [this, old] {
      for (const auto& id : old) {
        std::string src = state_dir_ + "/runs/" + id + "/src";
        std::error_code ec;
        if (fs::exists(src, ec)) mirror_->remove(src);
      }
    });
  }
  if (!at_start) return;
  const std::set<std::string> pruned_now(pruned.begin(), pruned.end());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir_ + "/runs", ec)) {
    std::string id = e.path().filename().string();
    // A run just pruned is on its way out (removed on a worker): not an orphan to warn about.
    if (!active_.count(id) && !preparing_.count(id) && !pruned_now.count(id) && !journal_->has_run(id)) {
      spdlog::warn("removing {}: no run of the journal owns it (a refused or interrupted submission)", e.path().string());
      remove_run_dir(e.path().string());
    }
  }
}

void Daemon::arm_retention_timer() {
  // Besides at start and after each run: hourly, so max-age-days holds on an idle host too.
  if (!retention_timer_) retention_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  retention_timer_->expires_after(std::chrono::hours(1));
  retention_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || cancelling_) return;
    prune_history(false);
    arm_retention_timer();
  });
}

std::string Daemon::open_journal() {
  const std::string path = state_dir_ + "/journal.sqlite";
  const std::string how = "; move it aside and start with `pto-runner serve --rebuild-journal` (same --root/--state-dir) "
                          "to rebuild the history from the run directories";
  if (opts_.rebuild_journal && fs::exists(path)) {
    // The damaged file is kept beside, never deleted: an operator may want to look at it.
    const std::string aside = path + ".damaged-" + make_run_id();
    std::error_code ec;
    fs::rename(path, aside, ec);
    if (ec) return "cannot move the journal " + path + " aside: " + ec.message();
    for (const char* suffix : {"-wal", "-shm"}) fs::rename(path + suffix, aside + suffix, ec);
    spdlog::warn("journal {} moved aside to {} for --rebuild-journal", path, aside);
  }
  std::string error;
  journal_ = Journal::open(path, error);
  if (!journal_) return "the journal " + path + " cannot be used (" + error + ")" + how;
  if (std::string bad = journal_->check_integrity(); !bad.empty()) {
    journal_.reset();
    return "the journal " + path + " is damaged (" + bad + ")" + how;
  }
  // A journal that is new or empty while run directories hold records (deleted, truncated to 0 bytes, or
  // --rebuild-journal): rebuild, loudly, rather than start with a silently empty history.
  bool have_records = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir_ + "/runs", ec))
    if (fs::exists(e.path() / "run.json")) {
      have_records = true;
      break;
    }
  if (have_records && (opts_.rebuild_journal || journal_->run_count() == 0)) {
    std::size_t n = rebuild_journal();
    spdlog::warn("journal {} {}: rebuilt {} run(s) from the run directories' run.json", path,
                 opts_.rebuild_journal ? "rebuilt on request" : "was empty while run directories exist", n);
  }
  return "";
}

std::size_t Daemon::rebuild_journal() {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir_ + "/runs", ec)) {
    std::string text, error;
    if (!read_regular_file((e.path() / "run.json").string(), 64 << 20, text, error)) continue;
    auto record = nlohmann::json::parse(text, nullptr, false);
    if (record.is_discarded() || !record.is_object() || record.value("id", "") != e.path().filename().string()) continue;
    // A run that never finished: as recovery would have left it.
    if (record.value("state", "") == "running") {
      record["state"] = "interrupted";
      record["result"] = to_int(ExitCode::Infrastructure);
      if (!record.contains("finished") || record["finished"].is_null()) record["finished"] = iso_now();
    }
    if (journal_->restore_run(record)) ++n;
    else throw std::runtime_error("cannot write the rebuilt journal: " + journal_->write_error());
  }
  return n;
}

void Daemon::journal_result(bool ok, const std::string& run_id) {
  if (ok) {
    if (journal_failing_) {
      journal_failing_ = false;
      spdlog::info("journal {} writes work again", journal_->path());
      // Runs that finished meanwhile are journaled now.
      for (auto it = unjournaled_.begin(); it != unjournaled_.end();) {
        const auto& r = it->second;
        if (!journal_->run_finished(it->first, r.value("state", ""), r.value("result", 3), r)) break;
        it = unjournaled_.erase(it);
      }
    }
    return;
  }
  if (!journal_failing_) {
    journal_failing_ = true;
    spdlog::error("journal {} cannot be written: {}; the runs it was recording end with an infrastructure error "
                  "(further failures are not logged until writes work again)",
                  journal_->path(), journal_->write_error());
  }
  if (run_id.empty()) return;
  // Not from inside the engine's own transition: the next turn of the loop ends the run.
  boost::asio::post(io_, [this, run_id, why = journal_->write_error()] {
    auto it = active_.find(run_id);
    if (it == active_.end() || it->second->engine->finished()) return;
    it->second->engine->abort("the journal " + journal_->path() + " cannot be written (" + why +
                              "): the run was stopped, its record may be incomplete");
    leases_->end_run(run_id, "its run was stopped by a journal failure");
  });
}

void Daemon::write_run_record(const std::string& run_dir, const nlohmann::json& record) {
  // Written whole beside, flushed to the disk, then renamed over the old one: a crash or power loss leaves
  // the old record or the new one, never half of one.
  const std::string path = run_dir + "/run.json", tmp = path + ".tmp";
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  const std::string text = dump_json(record);
  std::string error;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = std::strerror(errno);
  } else {
    std::size_t done = 0;
    while (done < text.size()) {
      ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    if (done != text.size() || ::fsync(fd) != 0) error = std::strerror(errno);
    if (::close(fd) != 0 && error.empty()) error = std::strerror(errno);
    if (error.empty()) fs::rename(tmp, path, ec);
    if (error.empty() && ec) error = ec.message();
  }
  if (!error.empty()) {
    fs::remove(tmp, ec);
    if (!record_failing_) spdlog::error("cannot write {} ({}); the journal keeps the run's history", path, error);
    record_failing_ = true;
    return;
  }
  record_failing_ = false;
}

void Daemon::remove_run_dir(const std::string& run_dir) {
  boost::asio::post(*git_workers_, [this, run_dir] {
    std::error_code ec;
    if (mirror_ && fs::exists(run_dir + "/src", ec)) mirror_->remove(run_dir + "/src");
    fs::remove_all(run_dir, ec);
  });
}

HttpResponse Daemon::start_run(EngineOptions eo, const Submission& s, Project project, Diagnostics diags,
                               const std::string& peer) {
  if (draining_ || cancelling_) return stopping_refusal();
  // Planned even after load errors (as lint does) so every finding, the pool check's among them, is answered.
  Plan plan = build_plan(project, PlanOptions{s.jobs, ""}, diags);
  if (!diags.has_input_errors()) apply_learned_durations(plan, *journal_);
  if (diags.has_input_errors()) {
    diags.sort();
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& d : diags.items())
      if (d.severity == Severity::Error)
        findings.push_back({{"file", d.file}, {"line", d.line}, {"col", d.col}, {"rule", d.rule}, {"message", d.message}});
    nlohmann::json body = {{"error", "the run cannot be planned"}, {"findings", findings}};
    if (!s.sha.empty()) body["sha"] = s.sha;
    return {400, "application/json", dump_json(body), {}};
  }
  for (const auto& [k, v] : s.env) eo.base_env[k] = v;  // runner -> request -> job -> step -> cards -> toolchain
  if (!s.ref.empty()) eo.base_env["PTO_RUNNER_REF"] = s.ref;
  if (!s.sha.empty()) eo.base_env["PTO_RUNNER_SHA"] = s.sha;
  eo.lead_executor = host_->lead_executor.get();
  // The run's own token for its steps' `task-submit` calls: their leases are charged to it and die with it.
  const std::string lease_token = random_hex(16);
  eo.base_env["PTO_RUNNER_SERVER"] = self_url_;
  eo.base_env["PTO_RUNNER_LEASE_TOKEN"] = lease_token;

  auto run = std::make_unique<ActiveRun>();
  // The request is journaled without env values: they may hold secrets.
  nlohmann::json env_names = nlohmann::json::array();
  for (const auto& [k, v] : s.env) env_names.push_back(k);
  run->request = {{"jobs", s.jobs}, {"ref", s.ref}, {"sha", s.sha}, {"env", env_names}};
  if (!s.github.is_null()) run->request["github"] = s.github;
  if (mirror_) run->request["source"] = {{"repo", cfg_.source.repo}, {"worktree", eo.root}};
  run->observer = std::make_unique<JournalObserver>(*this);
  const std::string id = eo.run_id;
  run->engine = std::make_unique<RunEngine>(
      EngineSeams{io_, *host_->clock, host_->broker(), *host_->executor, run->observer.get(), run->observer.get()}, std::move(plan),
      std::move(eo));
  nlohmann::json skeleton = run_to_json(run->engine->record(), run->engine->plan(), "running", -1, 0);
  skeleton["request"] = run->request;
  bool journaled = journal_->run_created(id, run->engine->record().created, run->request, skeleton);
  // Beside its logs from the start: a run interrupted before its first job ends is still in a rebuilt history.
  write_run_record(state_dir_ + "/runs/" + id, skeleton);
  run->engine->start();
  spdlog::info("run {} submitted from {}: {} job(s){}", id, peer, run->engine->plan().jobs.size(),
               s.sha.empty() ? "" : ", sha " + s.sha);
  active_[id] = std::move(run);
  lease_tokens_[lease_token] = id;
  journal_result(journaled, id);
  refresh_view();  // the submitter's next status shows its run
  return {201, "application/json", dump_json({{"id", id}, {"url", "/api/v1/runs/" + id}, {"state", "running"}}), {}};
}

HttpResponse Daemon::cancel(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) {
    if (journal_->run_record(id)) return {409, "application/json", dump_json({{"error", "run " + id + " has already finished"}}), {}};
    return {404, "application/json", dump_json({{"error", "no run " + id}}), {}};
  }
  it->second->engine->cancel(0);
  leases_->end_run(id, "its run was cancelled");  // the harness's leased commands stop with the run's steps
  spdlog::info("run {}: cancel requested", id);
  refresh_view();
  return {202, "application/json", dump_json({{"id", id}, {"state", "cancelling"}}), {}};
}

void Daemon::on_run_finished(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  view_changed();
  RunEngine& e = *it->second->engine;
  int result = to_int(e.result());
  std::string state = run_state_name(e.record(), true, result);
  nlohmann::json record = run_to_json(e.record(), e.plan(), state, result, e.now());
  record["request"] = it->second->request;
  write_run_record(state_dir_ + "/runs/" + id, record);
  if (!journal_->run_finished(id, state, result, record)) {
    journal_result(false, "");
    unjournaled_[id] = record;  // served from memory until the journal takes it
  }
  metrics_.runs_by_result[state]++;
  remember_finished(record);
  if (draining_ && !cancelling_) unread_finished_.insert(id);  // a drain lets its client see the end
  spdlog::info("run {} {} (exit {})", id, state, result);
  active_.erase(it);
  leases_->end_run(id, "its run ended");
  for (auto t = lease_tokens_.begin(); t != lease_tokens_.end();)
    t = t->second == id ? lease_tokens_.erase(t) : std::next(t);
  prune_history(false);
  refresh_view();  // whoever saw the run end reads a status where it has ended (cards free, counts updated)
  check_stopped();
}

HttpResponse Daemon::stopping_refusal() const {
  return {503, "application/json",
          dump_json({{"error", draining_ ? "the daemon is draining (SIGTERM): runs already accepted go on to their end, "
                                           "no new runs or leases are accepted; submit to the host that replaces it"
                                         : "the daemon is stopping (SIGINT): its runs are being cancelled"}}),
          {}};
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
  if (view_timer_) view_timer_->cancel();
  if (view_tick_) view_tick_->cancel();
  if (server_) server_->stop();
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
