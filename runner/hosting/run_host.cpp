// RunHost (hosting/run_host.h): a submission checked out (with `source:`), planned and made a HostedRun
// (hosting/hosted_run), begun when a sandbox user is free, cancelled on request, and once finished journaled
// and given back. What hosting one run means is HostedRun's; this file decides which runs the host holds.
#include "hosting/run_host.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <csignal>
#include <regex>

#include <spdlog/spdlog.h>

#include "caches/cache_tiers.h"
#include "host/host.h"
#include "hosting/host_leases.h"
#include "hosting/shutdown.h"
#include "util/worker_pools.h"
#include "plan/probe_plan.h"
#include "read_model/read_model.h"
#include "report/run_view.h"
#include "sandbox/sandbox_pool.h"
#include "source/git_mirror.h"
#include "store/case_history_queries.h"
#include "store/learned_durations.h"
#include "store/run_history.h"
#include "store/run_reporter.h"
#include "store/perf_history.h"
#include "store/step_results.h"
#include "supervise/wire.h"
#include "util/api_paths.h"
#include "util/clock.h"
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

RunHost::RunHost(RunHostParts parts, RunDefaults defaults, std::unique_ptr<SandboxPool> sandbox, Events events)
    : parts_(parts),
      defaults_(std::move(defaults)),
      sandbox_(std::move(sandbox)),
      events_(std::move(events)),
      leases_(HostLeases::Parts{parts.io, parts.host, parts.cfg, parts.history, parts.model.metrics, parts.stop},
              [this](const std::string& id) { return find(id); }, [this] { events_.refresh(); }, [this] { events_.changed(); }),
      users_(parts.io, *sandbox_, [this](const std::string& id) { return find(id); }, [this](HostedRun& run) { begun(run); },
             [this] { events_.changed(); }),
      attached_([this](const std::string& id) { return find(id); }) {}

RunHost::~RunHost() = default;

HostedRun* RunHost::find(const std::string& id) {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second.get();
}

EngineOptions RunHost::engine_options() const {
  // The daemon's own PTO_RUNNER_* variables (the token among them) never reach steps.
  return make_engine_options(defaults_.load.root, parts_.cfg.state_dir, parts_.cfg, defaults_.simulate, defaults_.time_scale,
                             InheritedEnv::AllowList);
}

void RunHost::submit(RunSubmission submission, const std::string& peer, HostCommands::Reply reply) {
  if (parts_.stop.stopping()) return reply(parts_.stop.refusal());
  auto s = std::make_shared<RunSubmission>(std::move(submission));
  if (!s->attach.empty()) {
    // One run per workflow run: a later client of the key joins its run; the first one makes it.
    if (auto joined = attached_.join(*s)) {
      if (joined->outcome == Outcome::Ok) events_.refresh();  // the run's page shows the jobs it now runs
      return reply(std::move(*joined));
    }
    reply = [this, key = s->attach, reply](Answer a) {
      if (a.outcome != Outcome::Created) attached_.not_made(key);  // the next client makes it
      reply(std::move(a));
    };
  }
  EngineOptions eo = engine_options();
  if (!parts_.mirror) {
    // The definitions are read again for every run: a `git pull` of jobs/ takes effect on the next submission.
    Diagnostics diags;
    Project project = load_project(defaults_.load, diags);
    return reply(start(std::move(eo), *s, std::move(project), std::move(diags), peer));
  }
  if (s->sha.empty())
    return reply({Outcome::BadRequest, {{"error", "sha is required: this daemon runs commits of " + parts_.cfg.source.repo}, {"field", "sha"}}});
  // A run of one commit: fetch and check out into the run's own worktree, load its definitions (with the
  // host's settings, never the commit's runner.yml), then plan and start here, on the engine thread.
  const std::string src = run_worktree(eo.run_dir);
  preparing_.insert(eo.run_id);
  boost::asio::post(parts_.pools.git, [this, s, eo = std::move(eo), src, reply, host = parts_.cfg, peer]() mutable {
    SourceResult got = parts_.mirror->checkout(s->sha, src);
    auto project = std::make_shared<Project>();
    auto diags = std::make_shared<Diagnostics>();
    if (got.ok()) {
      LoadOptions lo;
      lo.root = src;
      lo.host = host;
      *project = load_project(lo, *diags);
    }
    boost::asio::post(parts_.io, [this, s, eo = std::move(eo), src, reply, peer, got, project, diags]() mutable {
      preparing_.erase(eo.run_id);
      if (parts_.stop.stopping()) boost::asio::post(parts_.io, [this] { parts_.stop.check(); });  // accepted before the signal: answered, then it may stop
      const std::string run_dir = eo.run_dir;
      if (!got.ok()) {
        spdlog::warn("run refused: commit {}: {}", s->sha, got.message);
        parts_.history.remove_run_dir(run_dir);
        return reply(source_refusal(got, s->sha));
      }
      eo.root = src;
      Answer a = start(std::move(eo), *s, std::move(*project), std::move(*diags), peer);
      if (a.outcome != Outcome::Created) parts_.history.remove_run_dir(run_dir);
      reply(std::move(a));
    });
  });
}

Plan RunHost::plan_of(const Project& project, const RunSubmission& s, Diagnostics& diags, std::string& missing) {
  // Planned even after load errors (as lint does) so every finding, the pool check's among them, is answered.
  // An attached run is planned with every job of its commit: later clients of its workflow run add theirs.
  Plan plan = build_plan(project, PlanOptions{s.attach.empty() ? s.jobs : std::vector<std::string>{}, ""}, diags);
  if (diags.has_input_errors()) return plan;
  if (s.probe)  // only what the probed step needs (plan/probe_plan); a step the commit lacks is said so
    missing = keep_for_probe(plan, s.probe->job, s.probe->step, s.probe->tests);
  apply_learned_durations(plan, parts_.history.journal());
  return plan;
}

std::optional<EngineOptions::Perf> RunHost::perf_hooks(const std::string& ref, const std::string& sha) {
  if (!parts_.perf) return std::nullopt;
  EngineOptions::Perf p;
  p.ref = ref.empty() ? "local" : ref;  // a run of no ref (`serve` without source:) has a history of its own
  p.commit = sha;
  // The 50 runs before it: a nightly job's two months, enough to see a change and where it began.
  p.series = [this, ref = p.ref](const std::string& metric, const std::string& card_type) { return parts_.perf->series(metric, ref, card_type, 50); };
  p.record = [this](const PerfRecord& made) {
    if (!parts_.perf->record(made)) spdlog::warn("run {}: its perf samples of {} cannot be kept: {}", made.run, made.metric, parts_.perf->error());
  };
  return p;
}

EngineOptions::Reuse RunHost::reuse_hooks(const CacheScope& scope) {
  EngineOptions::Reuse r;
  if (!parts_.results) return r;
  // Scoped as the caches are: a pull request takes main's results and its own, never another pull request's;
  // main takes any (a merged tree its pull request tested green is the very tree it tests).
  std::vector<std::string> scopes;
  if (!scope.writes_protected) scopes = {"protected", scope.name};
  r.find = [this, scopes](const std::string& key) {
    return parts_.results->find(key, scopes, epoch_now() - parts_.cfg.reuse_max_age_days * 86400);
  };
  r.record = [this, name = scope.name](const ReusableResult& made) {
    ReusableResult kept = made;
    kept.scope = name;
    if (!parts_.results->record(kept)) spdlog::warn("run {}: its result of {} cannot be kept for reuse: {}", made.run, made.label, parts_.results->error());
  };
  return r;
}

void RunHost::lend_to_engine(EngineOptions& eo, const std::string& ref) {
  eo.lead_executor = parts_.host.lead_executor.get();
  // Its named caches, in the tier its ref may write (caches/cache_tiers); a remote's credential is masked.
  eo.caches = caches_for_run(parts_.cfg, ref, eo.run_dir, sandbox_->active());
  // A step's test reports are read and parsed on the worker pool, never on this thread (a GET waits on it).
  eo.offload = [this](std::function<void()> work, std::function<void()> then) {
    boost::asio::post(parts_.pools.reads, [this, work = std::move(work), then = std::move(then)]() mutable {
      work();
      boost::asio::post(parts_.io, std::move(then));
    });
  };
  eo.muted = events_.muted;
  // A split step's tests weighed by what the test history learned (one indexed read per test, once per split).
  eo.test_seconds = [history = TestHistoryQueries(journal_file(parts_.cfg.state_dir))](const std::vector<std::string>& ids) {
    return history.learned_seconds(ids);
  };
}

nlohmann::json RunHost::request_of(const RunSubmission& s, const EngineOptions& eo) const {
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
  const auto [priority, rule] = s.probe ? std::pair<int, std::string>{s.probe->priority, s.probe->purpose} : parts_.cfg.priority_of(s.ref);
  request["priority"] = {{"value", priority}, {"rule", rule.empty() ? nlohmann::json(nullptr) : nlohmann::json(rule)}};
  if (s.probe)
    request["probe"] = {{"purpose", s.probe->purpose}, {"job", s.probe->job}, {"step", s.probe->step}, {"tests", s.probe->tests}};
  if (s.control) request["control"] = true;
  if (!s.reuse) request["reuse"] = false;
  const std::string pull_request = pull_request_of(s);
  if (!pull_request.empty()) request["pull_request"] = pull_request;
  if (parts_.mirror) request["source"] = {{"repo", parts_.cfg.source.repo}, {"worktree", eo.root}};
  if (!s.attach.empty()) request["attach"] = s.attach;
  return request;
}

std::unique_ptr<HostedRun> RunHost::make(Plan plan, EngineOptions eo, nlohmann::json request, const std::string& run_token) {
  RunHosting lent{parts_.io, *parts_.host.clock, parts_.host.broker(), *parts_.host.executor, *sandbox_, parts_.cfg,
                  leases_.site_or_null(), &parts_.pools.git};
  return std::make_unique<HostedRun>(lent, std::move(plan), std::move(eo), std::move(request), &parts_.reporter, &parts_.reporter,
                                     run_token);
}

HostedRun& RunHost::keep(std::unique_ptr<HostedRun> run) {
  HostedRun& r = *run;
  runs_[r.id()] = std::move(run);
  parts_.model.active[r.id()] = {&r.engine(), &r.request()};
  r.set_on_finished([this](HostedRun& done) { finished(done); });
  if (r.request().contains("priority")) parts_.host.broker().set_priority(r.id(), r.request()["priority"].value("value", 0));
  return r;
}

Answer RunHost::start(EngineOptions eo, const RunSubmission& s, Project project, Diagnostics diags, const std::string& peer) {
  if (parts_.stop.stopping()) return parts_.stop.refusal();
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
  lend_to_engine(eo, s.ref);
  if (!eo.caches->remote_credential().empty()) eo.mask->add(eo.caches->remote_credential());
  // A run of a commit may take a green result of the same inputs for a step (reuse/), unless it asks not to; a
  // probe or a control run is asked to run, never to remember.
  if (s.reuse && !s.sha.empty() && parts_.mirror && parts_.results && !s.probe) eo.reuse = reuse_hooks(eo.caches->scope());
  const bool perf_probe = s.probe && (s.probe->perf_base || !s.probe->perf_against.empty());
  if (!s.probe || perf_probe) eo.perf = perf_hooks(s.ref, s.sha);
  // A pull request's perf steps with `compare: base` take turns with its merge base's build on one card; the
  // merge base's probe is that other build, and a perf bisection's probe takes turns with its good commit's
  // (bisect/base_comparisons).
  if (eo.perf && events_.perf_sample && parts_.mirror && (perf_probe || !pull_request_of(s).empty())) {
    const int priority = s.probe ? s.probe->priority : parts_.cfg.priority_of(s.ref).first;
    eo.perf->paired = [this, ref = s.ref, sha = s.sha, priority, against = s.probe ? s.probe->perf_against : std::string()](
                          const std::string& run, std::size_t j, std::size_t st) { events_.perf_sample(run, j, st, ref, sha, priority, against); };
    if (s.probe) {
      eo.perf->cards = s.probe->cards;
      eo.perf->record = nullptr;  // a probe's samples are kept with what asked for them, not in a ref's history
    }
  }
  nlohmann::json request = request_of(s, eo);
  const std::string pull_request = request.value("pull_request", "");

  auto run = make(std::move(plan), std::move(eo), std::move(request));
  if (!s.attach.empty()) {
    if (std::string unknown = run->engine().unknown_job(s.jobs); !unknown.empty())
      return Answer::error(Outcome::BadRequest, "no job '" + unknown + "' in the definitions");
    run->engine().hold_all_but(s.jobs);
  }
  HostedRun& r = keep(std::move(run));
  nlohmann::json skeleton = run_to_json(r.engine().record(), r.engine().plan(), "running", -1, 0);
  skeleton["request"] = r.request();
  const std::string id = r.id();
  parts_.history.run_created(id, r.engine().record().created, r.request(), skeleton);
  spdlog::info("run {} submitted from {}: {} job(s){}", id, peer, r.engine().plan().jobs.size(), s.sha.empty() ? "" : ", sha " + s.sha);
  if (!pull_request.empty() && parts_.cfg.supersede == Supersede::PullRequest) supersede_older(id, pull_request);
  users_.begin(r);  // now, or once a sandbox user is given back (hosting/user_queue)
  events_.refresh();  // the submitter's next status shows its run
  Answer made{Outcome::Created, {{"id", id}, {"url", api_path::run(id)}, {"state", "running"}}};
  if (!s.attach.empty()) attached_.made(s, made);
  return made;
}

void RunHost::begun(HostedRun& run) {
  // Its supervisor keeps what a next daemon needs to take it over (run_host_adopt.cpp); never the disk.
  if (parts_.host.supervised && adoptable(run.request())) keep_handover(run);
}

void RunHost::keep_handover(HostedRun& run) {
  parts_.host.supervised->keep_run(run.id(), run.handover());
  run.set_on_handover_changed([this](HostedRun& r) { parts_.host.supervised->keep_run(r.id(), r.handover()); });
}

void RunHost::stop_for_journal(const std::string& run_id, const std::string& why) {
  // Not from inside the engine's own transition: the next turn of the loop ends the run.
  boost::asio::post(parts_.io, [this, run_id, why] {
    if (HostedRun* run = find(run_id))
      run->abort("the journal " + journal_file(parts_.cfg.state_dir) + " cannot be written (" + why +
                 "): the run was stopped, its record may be incomplete");
  });
}

Answer RunHost::cancel(const std::string& id, const std::string& peer) {
  HostedRun* run = find(id);
  if (!run || run->engine().finished()) {
    for (const auto& r : parts_.model.host.recent)
      if (r.id == id) return Answer::error(Outcome::Conflict, "run " + id + " has already finished");
    if (run) return Answer::error(Outcome::Conflict, "run " + id + " has already finished");
    return Answer::error(Outcome::NotFound, "no run " + id);
  }
  run->cancel(0);
  events_.cancelled(id);
  spdlog::info("run {}: cancel requested from {}", id, peer);
  events_.refresh();
  return {Outcome::Accepted, {{"id", id}, {"state", "cancelling"}}};
}

void RunHost::drain(double minutes, std::function<void(int)> done) {
  if (parts_.stop.stopping()) return;
  spdlog::warn("SIGTERM: draining: {} active run(s) go on to their end (at most {} min, shutdown-timeout-minutes); "
               "no new runs or leases; SIGTERM again or SIGINT cancels them",
               runs_.size(), minutes);
  parts_.stop.begin_drain(std::move(done), minutes * 60, [this] {
    spdlog::warn("shutdown-timeout-minutes passed with {} run(s) still active: cancelling them", runs_.size());
    cancel_all(143, nullptr);
  });
  events_.changed();
}

void RunHost::cancel_all(int exit_code, std::function<void(int)> done) {
  if (!parts_.stop.begin_cancel(exit_code, std::move(done))) return;
  events_.changed();
  if (!quiet()) {
    spdlog::warn("cancelling {} active run(s) and {} lease(s)", runs_.size(), leases_.book.active().size());
    for (auto& [id, run] : runs_)
      if (!run->engine().finished()) run->cancel(SIGTERM);
    leases_.book.end_all("the daemon is shutting down");
  }
  parts_.stop.check();
}

void RunHost::finished(HostedRun& run) {
  const std::string id = run.id();
  events_.finished(run);  // a probe's verdict, a control's to its pull request's step
  attached_.forget_run(id);
  parts_.host.broker().forget(id);  // its card-time competes with nobody any more
  const RunEngine& e = run.engine();
  const int result = to_int(e.result());
  const std::string state = run_state_name(e.record(), true, result);
  nlohmann::json record = run_to_json(e.record(), e.plan(), state, result, e.now());
  record["request"] = run.request();
  parts_.history.run_finished(id, state, result, record);
  parts_.stop.run_finished(id);  // a drain lets its client see the end
  spdlog::info("run {} {} (exit {})", id, state, result);
  parts_.model.active.erase(id);
  if (parts_.host.supervised) parts_.host.supervised->forget_run(id);
  run.give_back([this, id] { returned(id); });
  events_.after_run();
  events_.refresh();  // whoever saw the run end reads a status where it has ended (cards free, counts updated)
  if (auto w = end_watchers_.find(id); w != end_watchers_.end()) {
    auto watchers = std::move(w->second);
    end_watchers_.erase(w);
    for (const auto& watcher : watchers)
      if (auto ended = watcher.lock()) (*ended)();
  }
  parts_.stop.check();  // after the watchers: a draining daemon waits for each end to be read
}

void RunHost::when_ended(const std::string& id, std::weak_ptr<const std::function<void()>> ended) {
  auto& watchers = end_watchers_[id];
  // Those answered at their own time are gone: a run followed for hours by one client keeps one, not thousands.
  watchers.erase(std::remove_if(watchers.begin(), watchers.end(), [](const auto& w) { return w.expired(); }), watchers.end());
  watchers.push_back(std::move(ended));
}

void RunHost::returned(const std::string& id) {
  // Not inside the run's own callback: it is destroyed on the next turn of the loop.
  boost::asio::post(parts_.io, [this, id] {
    runs_.erase(id);
    users_.retry();
    parts_.stop.check();
  });
}

void RunHost::supersede_older(const std::string& id, const std::string& pull_request) {
  const std::string created = runs_.at(id)->engine().record().created;
  for (auto& [other, r] : runs_) {
    const RunRecord& rec = r->engine().record();
    if (other == id || r->request().value("pull_request", "") != pull_request || rec.cancelled || r->engine().finished()) continue;
    if (rec.created > created) continue;  // never a newer one
    spdlog::info("run {} superseded by run {} (pull request {})", other, id, pull_request);
    r->supersede(id);
  }
}

std::string pull_request_of(const RunSubmission& s) {
  // refs/pull/N/merge or refs/pull/N/head (what a pull request's workflow run checks out), else the head
  // branch GitHub names ($GITHUB_HEAD_REF); a push to a branch, the main branch among them, is no pull request.
  static const std::regex pr_ref("refs/pull/([0-9]+)/(merge|head)");
  std::smatch m;
  const std::string repo = s.github.is_object() ? s.github.value("repository", "") : "";
  if (std::regex_match(s.ref, m, pr_ref)) return repo + "#" + m[1].str();
  if (s.github.is_object() && s.github.contains("head_ref")) return repo + ":" + s.github["head_ref"].get<std::string>();
  return "";
}

}  // namespace pto
