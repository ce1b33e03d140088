// The daemon's runs: a submission checked out (with `source:`), planned and made a HostedRun
// (hosting/hosted_run), begun when a sandbox user is free, cancelled on request, and once finished journaled
// and given back. What hosting one run means is HostedRun's; this file decides which runs the host holds.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/daemon.h"
#include "plan/probe_plan.h"
#include "report/run_view.h"
#include "store/learned_durations.h"
#include "store/case_history_queries.h"
#include "util/api_paths.h"
#include "util/secret_mask.h"
#include "util/state_paths.h"

namespace pto {

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

Answer planning_refusal(Diagnostics& diags, const std::string& sha) {
  diags.sort();
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& d : diags.items())
    if (d.severity == Severity::Error)
      findings.push_back({{"file", d.file}, {"line", d.line}, {"col", d.col}, {"rule", d.rule}, {"message", d.message}});
  nlohmann::json body = {{"error", "the run cannot be planned"}, {"findings", findings}};
  if (!sha.empty()) body["sha"] = sha;
  return {Outcome::BadRequest, body};
}

}  // namespace

HostedRun* Daemon::find_run(const std::string& id) {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second.get();
}

Answer Daemon::detach_client(const std::string& run, const std::string& client, bool cancel, const Caller&) {
  Answer a = attached_.detach(run, client, cancel);
  if (a.outcome == Outcome::Ok) refresh_view();
  return a;
}

void Daemon::submit_run(RunSubmission submission, const Caller& by, Reply reply) {
  if (!endpoints_ || stop_.stopping()) return reply(stop_.refusal());
  auto s = std::make_shared<RunSubmission>(std::move(submission));
  if (!s->attach.empty()) {
    // One run per workflow run: a later client of the key joins its run; the first one makes it.
    if (auto joined = attached_.join(*s)) {
      if (joined->outcome == Outcome::Ok) refresh_view();  // the run's page shows the jobs it now runs
      return reply(std::move(*joined));
    }
    reply = [this, key = s->attach, reply](Answer a) {
      if (a.outcome != Outcome::Created) attached_.not_made(key);  // the next client makes it
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
  const std::string src = run_worktree(eo.run_dir);
  preparing_.insert(eo.run_id);
  boost::asio::post(pools_->git, [this, s, eo = std::move(eo), src, reply, host = cfg_, peer = by.peer]() mutable {
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
      if (stop_.stopping()) boost::asio::post(io_, [this] { stop_.check(); });  // accepted before the signal: answered, then it may stop
      const std::string run_dir = eo.run_dir;
      if (!got.ok()) {
        spdlog::warn("run refused: commit {}: {}", s->sha, got.message);
        history_->remove_run_dir(run_dir);
        return reply(source_refusal(got, s->sha));
      }
      eo.root = src;
      Answer a = start_run(std::move(eo), *s, std::move(*project), std::move(*diags), peer);
      if (a.outcome != Outcome::Created) history_->remove_run_dir(run_dir);
      reply(std::move(a));
    });
  });
}

Plan Daemon::plan_of(const Project& project, const RunSubmission& s, Diagnostics& diags, std::string& missing) {
  // Planned even after load errors (as lint does) so every finding, the pool check's among them, is answered.
  // An attached run is planned with every job of its commit: later clients of its workflow run add theirs.
  Plan plan = build_plan(project, PlanOptions{s.attach.empty() ? s.jobs : std::vector<std::string>{}, ""}, diags);
  if (diags.has_input_errors()) return plan;
  if (s.probe)  // only what the probed step needs (plan/probe_plan); a step the commit lacks is said so
    missing = keep_for_probe(plan, s.probe->job, s.probe->step, s.probe->tests);
  apply_learned_durations(plan, history_->journal());
  return plan;
}

void Daemon::host_engine_options(EngineOptions& eo) {
  eo.lead_executor = host_->lead_executor.get();
  // A step's test reports are read and parsed on the worker pool, never on this thread (a GET waits on it).
  eo.offload = [this](std::function<void()> work, std::function<void()> then) {
    boost::asio::post(pools_->reads, [this, work = std::move(work), then = std::move(then)]() mutable {
      work();
      boost::asio::post(io_, std::move(then));
    });
  };
  eo.muted = [this](const std::string& test) { return mutes_->muted(test); };  // the mutes in force when a test fails
  // A split step's tests weighed by what the test history learned (one indexed read per test, once per split).
  eo.test_seconds = [history = TestHistoryQueries(journal_file(state_dir_))](const std::vector<std::string>& ids) {
    return history.learned_seconds(ids);
  };
}

nlohmann::json Daemon::request_of(const RunSubmission& s, const EngineOptions& eo) const {
  // The request is journaled without env values: they may hold secrets.
  nlohmann::json env_names = nlohmann::json::array(), secret_names = nlohmann::json::array();
  for (const auto& [k, v] : s.env) env_names.push_back(k);
  for (const auto& [k, v] : s.secrets) secret_names.push_back(k);
  nlohmann::json request = {{"jobs", s.jobs}, {"ref", s.ref}, {"sha", s.sha}, {"env", env_names}};
  if (!s.secrets.empty()) request["secrets"] = secret_names;
  if (!s.github.is_null()) request["github"] = s.github;
  if (!s.submitter.is_null()) request["submitter"] = s.submitter;  // who may cancel it besides the admin
  // Its place among other runs (sched/queue_order): the priority of its ref; and which pull request it is.
  // A probe (a bisection's, a control run's) has its own place: below the runs whose questions it answers.
  const auto [priority, rule] = s.probe ? std::pair<int, std::string>{s.probe->priority, s.probe->purpose} : cfg_.priority_of(s.ref);
  request["priority"] = {{"value", priority}, {"rule", rule.empty() ? nlohmann::json(nullptr) : nlohmann::json(rule)}};
  if (s.probe)
    request["probe"] = {{"purpose", s.probe->purpose}, {"job", s.probe->job}, {"step", s.probe->step}, {"tests", s.probe->tests}};
  if (s.control) request["control"] = true;
  const std::string pull_request = pull_request_of(s);
  if (!pull_request.empty()) request["pull_request"] = pull_request;
  if (mirror_) request["source"] = {{"repo", cfg_.source.repo}, {"worktree", eo.root}};
  if (!s.attach.empty()) request["attach"] = s.attach;
  return request;
}

Answer Daemon::start_run(EngineOptions eo, const RunSubmission& s, Project project, Diagnostics diags, const std::string& peer) {
  if (stop_.stopping()) return stop_.refusal();
  std::string missing;
  Plan plan = plan_of(project, s, diags, missing);
  if (diags.has_input_errors()) return planning_refusal(diags, s.sha);
  if (!missing.empty()) return {Outcome::BadRequest, {{"error", missing}, {"missing", true}, {"sha", s.sha}}};
  for (const auto& [k, v] : s.env) eo.base_env[k] = v;  // runner -> request -> job -> step -> cards -> toolchain
  eo.mask = std::make_shared<SecretMask>();
  for (const auto& [k, v] : s.secrets) {  // the steps' environment only: never journaled, shown or logged
    eo.base_env[k] = v;
    eo.mask->add(v);
  }
  if (!s.ref.empty()) eo.base_env["PTO_RUNNER_REF"] = s.ref;
  if (!s.sha.empty()) eo.base_env["PTO_RUNNER_SHA"] = s.sha;
  host_engine_options(eo);
  nlohmann::json request = request_of(s, eo);
  const int priority = request["priority"]["value"];
  const std::string pull_request = request.value("pull_request", "");

  RunHosting hosting{io_, *host_->clock, host_->broker(), *host_->executor, *sandbox_, cfg_, leases_->site_or_null(), &pools_->git};
  auto run = std::make_unique<HostedRun>(hosting, std::move(plan), std::move(eo), std::move(request), reporter_.get(), reporter_.get());
  if (!s.attach.empty()) {
    if (std::string unknown = run->engine().unknown_job(s.jobs); !unknown.empty())
      return Answer::error(Outcome::BadRequest, "no job '" + unknown + "' in the definitions");
    run->engine().hold_all_but(s.jobs);
  }
  nlohmann::json skeleton = run_to_json(run->engine().record(), run->engine().plan(), "running", -1, 0);
  skeleton["request"] = run->request();
  const std::string id = run->id();
  HostedRun& r = *run;
  runs_[id] = std::move(run);
  model_.active[id] = {&r.engine(), &r.request()};
  r.set_on_finished([this](HostedRun& finished) { on_run_finished(finished); });
  history_->run_created(id, r.engine().record().created, r.request(), skeleton);
  spdlog::info("run {} submitted from {}: {} job(s){}", id, peer, r.engine().plan().jobs.size(), s.sha.empty() ? "" : ", sha " + s.sha);
  host_->broker().set_priority(id, priority);
  if (!pull_request.empty() && cfg_.supersede == Supersede::PullRequest) supersede_older(id, pull_request);
  users_->begin(r);  // now, or once a sandbox user is given back (hosting/user_queue)
  refresh_view();  // the submitter's next status shows its run
  Answer made{Outcome::Created, {{"id", id}, {"url", api_path::run(id)}, {"state", "running"}}};
  if (!s.attach.empty()) attached_.made(s, made);
  return made;
}

void Daemon::run_begun(HostedRun& run) {
  // Its supervisor keeps what a next daemon needs to take it over (daemon_adopt.cpp); never the disk.
  if (host_->supervised && adoptable(run.request())) keep_handover(run);
}

void Daemon::keep_handover(HostedRun& run) {
  host_->supervised->keep_run(run.id(), run.handover());
  run.set_on_handover_changed([this](HostedRun& r) { host_->supervised->keep_run(r.id(), r.handover()); });
}

void Daemon::stop_run_for_journal(const std::string& run_id, const std::string& why) {
  // Not from inside the engine's own transition: the next turn of the loop ends the run.
  boost::asio::post(io_, [this, run_id, why] {
    if (HostedRun* run = find_run(run_id))
      run->abort("the journal " + state_dir_ + "/journal.sqlite cannot be written (" + why +
                 "): the run was stopped, its record may be incomplete");
  });
}

Answer Daemon::cancel_run(const std::string& id, const Caller& by) {
  HostedRun* run = find_run(id);
  if (!run || run->engine().finished()) {
    for (const auto& r : model_.host.recent)
      if (r.id == id) return Answer::error(Outcome::Conflict, "run " + id + " has already finished");
    if (run) return Answer::error(Outcome::Conflict, "run " + id + " has already finished");
    return Answer::error(Outcome::NotFound, "no run " + id);
  }
  run->cancel(0);
  controls_->cancel_of(id);  // its end waits for them
  spdlog::info("run {}: cancel requested from {}", id, by.peer);
  refresh_view();
  return {Outcome::Accepted, {{"id", id}, {"state", "cancelling"}}};
}

void Daemon::on_run_finished(HostedRun& run) {
  const std::string id = run.id();
  bisections_->probe_finished(run.id(), run.engine().record(), run.engine().plan(), run.request().value("sha", ""));  // a probe's verdict
  controls_->finished(run.id(), run.engine().record(), run.engine().plan());  // a control's verdict to its pull request's step
  attached_.forget_run(id);
  host_->broker().forget(id);  // its card-time competes with nobody any more
  const RunEngine& e = run.engine();
  const int result = to_int(e.result());
  const std::string state = run_state_name(e.record(), true, result);
  nlohmann::json record = run_to_json(e.record(), e.plan(), state, result, e.now());
  record["request"] = run.request();
  history_->run_finished(id, state, result, record);
  stop_.run_finished(id);  // a drain lets its client see the end
  spdlog::info("run {} {} (exit {})", id, state, result);
  model_.active.erase(id);
  if (host_->supervised) host_->supervised->forget_run(id);
  run.give_back([this, id] { run_returned(id); });
  prune(false);
  refresh_view();  // whoever saw the run end reads a status where it has ended (cards free, counts updated)
  stop_.check();
}

void Daemon::run_returned(const std::string& id) {
  // Not inside the run's own callback: it is destroyed on the next turn of the loop.
  boost::asio::post(io_, [this, id] {
    runs_.erase(id);
    users_->retry();
    stop_.check();
  });
}

void Daemon::step_final(const RunRecord& r, const Plan& p, int job, int step) {
  HostedRun* run = find_run(r.id);
  if (run && run->request().contains("probe")) return;  // a bisection's probe or a control: its own story, not main's
  const std::string ref = run ? run->request().value("ref", "") : "";
  const StepRecord& s = r.jobs[job].steps[step];
  if ((s.state == StepState::Failed || s.state == StepState::TimedOut) && p.jobs[job].steps[step].tests.any() &&
      s.error.rfind("ran no tests", 0) == 0)
    model_.metrics.ran_no_tests_by_branch[ref == cfg_.main_ref ? "main" : ref.rfind("refs/pull/", 0) == 0 ? "pull_request" : "other"]++;
  notices_->step_final(r, p, job, step, {ref, run ? run->request().value("sha", "") : "", run ? &run->engine().mask() : nullptr});
}

}  // namespace pto
