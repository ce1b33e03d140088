#include "server/daemon.h"

#include <signal.h>
#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "exec/process_sweep.h"
#include "report/run_view.h"
#include "sched/device_pool.h"
#include "util/json_text.h"
#include "util/random_hex.h"

namespace fs = std::filesystem;

namespace pto {

/// Journals every transition and keeps the daemon's metrics and toolchain state current.
class Daemon::JournalObserver : public RunObserver {
 public:
  JournalObserver(Daemon& d) : d_(d) {}
  void on_step_started(const RunRecord& r, const Plan& p, int job, int step) override {
    d_.status_cache_.clear();  // any transition invalidates the rendered status
    const StepRecord& s = r.jobs[job].steps[step];
    if (s.runnable_at >= 0 && s.started_at >= 0) d_.metrics_.wait_seconds.observe(s.started_at - s.runnable_at);
    journal(r, p, job, step);
  }
  void on_step_finished(const RunRecord& r, const Plan& p, int job, int step) override {
    d_.status_cache_.clear();
    const StepRecord& s = r.jobs[job].steps[step];
    d_.metrics_.steps_by_result[to_string(s.state)]++;
    if (s.started_at >= 0 && s.finished_at >= 0) d_.metrics_.step_seconds.observe(s.finished_at - s.started_at);
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
    journal(r, p, job, step);
  }
  void on_job_finished(const RunRecord& r, const Plan& p, int job) override {
    d_.status_cache_.clear();
    if (!d_.journal_) return;
    d_.journal_->event(r.id, "job", job, -1, job_to_json(r, p, job, 0, false));
    for (std::size_t s = 0; s < p.jobs[job].steps.size(); ++s)  // steps skipped or cancelled with their job
      if (r.jobs[job].steps[s].attempt == 0) journal(r, p, job, static_cast<int>(s));
  }
  void on_run_finished(const RunRecord& r, const Plan&) override {
    boost::asio::post(d_.io_, [&d = d_, id = r.id] { d.on_run_finished(id); });
  }

 private:
  void journal(const RunRecord& r, const Plan& p, int job, int step) {
    if (d_.journal_) d_.journal_->event(r.id, "step", job, step, step_to_json(r, p, job, step, 0));
  }
  Daemon& d_;
};

Daemon::Daemon(boost::asio::io_context& io, DaemonOptions opts) : io_(io), opts_(std::move(opts)) {}
Daemon::~Daemon() = default;

double Daemon::uptime() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

std::string Daemon::start() {
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
  if (!host_errors.empty()) return "the host settings have errors:" + host_errors;
  if (!definition_errors.empty())
    std::fprintf(stderr, "pto-runner serve: warning: the definitions have errors; runs are refused until they are fixed:%s\n",
                 definition_errors.c_str());
  cfg_ = project.runner;
  resolve_host_dirs(cfg_, project.root, opts_.lock_dir, opts_.state_dir);
  state_dir_ = cfg_.state_dir;
  fs::create_directories(state_dir_);

  // Token: the configured file, or one generated on first start and kept (0600) in the state dir.
  token_path_ = resolve_under_root(project.root, !opts_.token_file.empty() ? opts_.token_file : cfg_.token_file);
  if (token_path_.empty()) {
    token_path_ = state_dir_ + "/token";
    if (!fs::exists(token_path_)) {
      std::ofstream(token_path_) << random_hex(32) << "\n";
      ::chmod(token_path_.c_str(), 0600);
    }
  }
  std::ifstream tf(token_path_);
  if (!tf) return "cannot read token file " + token_path_;
  std::getline(tf, token_);
  while (!token_.empty() && std::isspace(static_cast<unsigned char>(token_.back()))) token_.pop_back();
  if (token_.size() < 16) return "token file " + token_path_ + " holds fewer than 16 characters";

  std::string error;
  journal_ = Journal::open(state_dir_ + "/journal.sqlite", error);
  if (!journal_) return error;
  pool_ = std::make_unique<DevicePool>(cfg_, state_dir_);
  if (std::string e = pool_->init(); !e.empty()) return e;
  recover();
  dispatcher_ = std::make_unique<Dispatcher>(io_, *pool_);
  executor_ = opts_.simulate ? make_simulated_executor(io_) : make_local_executor(io_);
  if (opts_.simulate) lead_executor_ = make_local_executor(io_);

  std::string address;
  unsigned short port = 0;
  std::string listen = opts_.listen.empty() ? cfg_.listen : opts_.listen;
  if (!split_listen(listen, address, port)) return "bad listen address '" + listen + "' (want ADDRESS:PORT)";
  server_ = std::make_unique<HttpServer>(io_, [this](const HttpRequest& r) { return handle(r); }, opts_.limits);
  return server_->listen(address, port);
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
    metrics_.runs_by_result["interrupted"]++;
    spdlog::warn("recovered run {}: it was active when the daemon stopped; marked interrupted, {} leftover process(es) killed",
                 id, killed);
  }
}

HttpResponse Daemon::submit(const HttpRequest& req) {
  auto bad = [](const std::string& field, const std::string& why) {
    return HttpResponse{400, "application/json", dump_json({{"error", why}, {"field", field}})};
  };
  nlohmann::json body = nlohmann::json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  if (body.is_discarded()) return bad("", "the body is not valid JSON");
  if (!body.is_object()) return bad("", "the body must be a JSON object {\"jobs\": [...], \"ref\", \"sha\", \"env\"}");
  for (const auto& [k, v] : body.items())
    if (k != "jobs" && k != "ref" && k != "sha" && k != "env") return bad(k, "unknown field '" + k + "'");
  std::vector<std::string> jobs;
  if (body.contains("jobs")) {
    if (!body["jobs"].is_array()) return bad("jobs", "jobs must be a list of job names");
    for (const auto& j : body["jobs"]) {
      if (!j.is_string()) return bad("jobs", "jobs must be a list of job names");
      jobs.push_back(j.get<std::string>());
    }
  }
  for (const char* f : {"ref", "sha"})
    if (body.contains(f) && !body[f].is_string()) return bad(f, std::string(f) + " must be a string");
  std::map<std::string, std::string> env;
  if (body.contains("env")) {
    if (!body["env"].is_object()) return bad("env", "env must be an object of NAME: \"value\"");
    for (const auto& [k, v] : body["env"].items()) {
      bool name_ok = !k.empty() && k.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos &&
                     !std::isdigit(static_cast<unsigned char>(k[0]));
      if (!name_ok || !v.is_string()) return bad("env." + k, "env entries are NAME: \"value\" with NAME like [A-Za-z_][A-Za-z0-9_]*");
      env[k] = v.get<std::string>();
    }
  }
  if (!server_ || shutting_down_) return {503, "application/json", R"({"error":"shutting down"})"};
  // The definitions are read again for every run: a `git pull` of jobs/ takes effect on the next submission.
  Diagnostics diags;
  Project project = load_project(opts_.load, diags);
  Plan plan;
  if (!diags.has_input_errors()) plan = build_plan(project, PlanOptions{jobs, ""}, diags);
  if (diags.has_input_errors()) {
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& d : diags.items())
      if (d.severity == Severity::Error)
        findings.push_back({{"file", d.file}, {"line", d.line}, {"col", d.col}, {"rule", d.rule}, {"message", d.message}});
    return {400, "application/json", dump_json({{"error", "the run cannot be planned"}, {"findings", findings}})};
  }
  // The daemon's own PTO_RUNNER_* variables (the token among them) never reach steps.
  EngineOptions eo = make_engine_options(project.root, state_dir_, opts_.load.config_file, cfg_, opts_.simulate,
                                         opts_.time_scale, "PTO_RUNNER_");
  for (const auto& [k, v] : env) eo.base_env[k] = v;  // runner -> request -> job -> step -> cards -> toolchain
  if (body.contains("ref")) eo.base_env["PTO_RUNNER_REF"] = body["ref"];
  if (body.contains("sha")) eo.base_env["PTO_RUNNER_SHA"] = body["sha"];
  eo.lead_executor = lead_executor_.get();

  auto run = std::make_unique<ActiveRun>();
  // The request is journaled without env values: they may hold secrets.
  nlohmann::json env_names = nlohmann::json::array();
  for (const auto& [k, v] : env) env_names.push_back(k);
  run->request = {{"jobs", jobs}, {"ref", body.value("ref", "")}, {"sha", body.value("sha", "")}, {"env", env_names}};
  run->observer = std::make_unique<JournalObserver>(*this);
  run->engine = std::make_unique<RunEngine>(io_, plan, *dispatcher_, *executor_, eo, run->observer.get());
  const std::string id = eo.run_id;
  journal_->run_created(id, run->engine->record().created, run->request,
                        run_to_json(run->engine->record(), run->engine->plan(), "running", -1, 0));
  run->engine->start();
  spdlog::info("run {} submitted from {}: {} job(s){}", id, req.peer, plan.jobs.size(),
               body.contains("sha") ? ", sha " + body["sha"].get<std::string>() : "");
  active_[id] = std::move(run);
  status_cache_.clear();
  return {201, "application/json", dump_json({{"id", id}, {"url", "/api/v1/runs/" + id}, {"state", "running"}})};
}

HttpResponse Daemon::cancel(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) {
    if (journal_->run_record(id)) return {409, "application/json", dump_json({{"error", "run " + id + " has already finished"}})};
    return {404, "application/json", dump_json({{"error", "no run " + id}})};
  }
  it->second->engine->cancel(0);
  spdlog::info("run {}: cancel requested", id);
  status_cache_.clear();
  return {202, "application/json", dump_json({{"id", id}, {"state", "cancelling"}})};
}

void Daemon::on_run_finished(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  status_cache_.clear();
  RunEngine& e = *it->second->engine;
  int result = to_int(e.result());
  std::string state = run_state_name(e.record(), true, result);
  nlohmann::json record = run_to_json(e.record(), e.plan(), state, result, e.now());
  record["request"] = it->second->request;
  journal_->run_finished(id, state, result, record);
  metrics_.runs_by_result[state]++;
  spdlog::info("run {} {} (exit {})", id, state, result);
  active_.erase(it);
  if (active_.empty() && on_drained_) boost::asio::post(io_, std::exchange(on_drained_, nullptr));
}

void Daemon::shutdown(std::function<void()> done) {
  shutting_down_ = true;
  if (server_) server_->stop();
  on_drained_ = std::move(done);
  if (active_.empty()) {
    boost::asio::post(io_, std::exchange(on_drained_, nullptr));
    return;
  }
  for (auto& [id, run] : active_) run->engine->cancel(SIGTERM);
}

}  // namespace pto
