#include "engine/engine.h"

#include <random>

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "config/device_spec.h"
#include "exec/process_marker.h"
#include "plan/condition.h"
#include "sandbox/run_tree.h"
#include "util/byte_size.h"
#include "util/api_paths.h"
#include "util/ids.h"
#include "util/process_env.h"
#include "util/regular_file.h"
#include "util/secret_mask.h"
#include "util/clock.h"
#include "util/state_paths.h"

namespace fs = std::filesystem;

namespace pto {

RunEngine::RunEngine(EngineSeams seams, Plan plan, EngineOptions opts)
    : io_(seams.io),
      clock_(seams.clock),
      plan_(std::move(plan)),
      broker_(seams.broker),
      executor_(seams.executor),
      opts_(std::move(opts)),
      observer_(seams.observer),
      journal_(seams.journal),
      flow_(plan_, run_, legs_by_name_, opts_.run_dir) {
  if (!opts_.mask) opts_.mask = std::make_shared<SecretMask>();
  flow_.set_mask(opts_.mask);
  run_.id = opts_.run_id.empty() ? new_run_id() : opts_.run_id;
  run_.created = clock_.iso_now();
  run_.simulated = opts_.simulate;
  for (std::size_t j = 0; j < plan_.jobs.size(); ++j) {
    JobRecord jr;
    jr.steps.resize(plan_.jobs[j].steps.size());
    for (auto& s : jr.steps) s.created = run_.created;
    run_.jobs.push_back(std::move(jr));
    legs_by_name_[plan_.jobs[j].name].push_back(j);
    step_revisions_.emplace_back(plan_.jobs[j].steps.size(), 0);
  }
  epoch_ = std::random_device{}() | (static_cast<std::uint64_t>(std::random_device{}()) << 32);
  recount();
}

RunEngine::~RunEngine() {
  if (journal_) journal_->run_gone(run_);
}

double RunEngine::now() const { return clock_.now() - t0_; }

void RunEngine::run_as(const RunAs& user) {
  opts_.run_as = user;
  flow_.set_files_owner(user.uid);
}

namespace {

/// Sets NAME=value in a step's environment list, replacing what is there.
void set_env(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  auto it = std::find_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
  if (it != env.end()) *it = prefix + value;
  else env.push_back(prefix + value);
}

}  // namespace

void RunEngine::start() {
  started_ = true;
  t0_ = clock_.now();
  fs::create_directories(run_logs(opts_.run_dir));
  fs::create_directories(run_files(opts_.run_dir));
  boost::asio::post(io_, [this] {
    foresee_reuse();
    pump();
  });
}

std::string RunEngine::label(std::size_t job, std::size_t step) const {
  return step_label(plan_.jobs[job], plan_.jobs[job].steps[step]);
}

Executor& RunEngine::executor_for(const PlanStep& step) {
  return step.kind == StepKind::ToolchainSetup && opts_.lead_executor ? *opts_.lead_executor : executor_;
}

void RunEngine::recount() {
  tally_.assign(run_.jobs.size(), JobTally{});
  for (std::size_t j = 0; j < run_.jobs.size(); ++j)
    for (std::size_t s = 0; s < run_.jobs[j].steps.size(); ++s) {
      const StepState st = run_.jobs[j].steps[s].state;
      const bool plain = !plan_.jobs[j].steps[s].if_has_status_function;
      JobTally& t = tally_[j];
      t.final += is_final(st);
      t.active += st == StepState::Waiting || st == StepState::Running;
      t.plain += plain;
      t.plain_final += plain && is_final(st);
    }
}

void RunEngine::transition(std::size_t j, std::size_t s, StepState to) {
  StepRecord& sr = run_.jobs[j].steps[s];
  const StepState from = sr.state;
  sr.state = to;
  JobTally& tally = tally_[j];
  if (is_final(from) != is_final(to)) {
    if (is_final(to)) ++tally.final, tally.plain_final += !plan_.jobs[j].steps[s].if_has_status_function;
    else --tally.final, tally.plain_final -= !plan_.jobs[j].steps[s].if_has_status_function;
  }
  auto active = [](StepState st) { return st == StepState::Waiting || st == StepState::Running; };
  if (active(from) != active(to)) tally.active += active(to) ? 1 : -1;
  const std::string at = clock_.iso_now();
  const double t = now();
  if (to == StepState::Waiting && sr.runnable_at < 0) {
    sr.runnable = at;
    sr.runnable_at = t;
  }
  if (to == StepState::Running) {
    sr.started = at;
    sr.started_at = t;
    sr.finished.clear();  // an earlier attempt's end
    sr.finished_at = -1;
  }
  if (is_final(to)) {
    sr.finished = at;
    sr.finished_at = t;
  }
  if (to == StepState::Succeeded) record_result(j, s);
  kept(j, s, true);
  if (observer_) observer_->on_step_changed(run_, plan_, static_cast<int>(j), static_cast<int>(s), from);
}

std::uint64_t RunEngine::start_processes(Executor& exec, StepLaunch launch, std::function<void(const StepOutcome&)> done) {
  if (journal_) journal_->durable();
  return exec.start(std::move(launch), std::move(done));
}

void RunEngine::signal_processes(Executor& exec, std::uint64_t handle) {
  if (journal_) journal_->durable();
  exec.cancel(handle);
}

void RunEngine::kept(std::size_t j, std::size_t s, bool transition) {
  step_revisions_[j][s] = ++revision_;
  if (const int c = plan_.jobs[j].steps[s].collect_step; plan_.jobs[j].steps[s].shard && c >= 0)
    step_revisions_[j][static_cast<std::size_t>(c)] = revision_;
  if (!journal_) return;
  if (transition) journal_->step_changed(run_, plan_, static_cast<int>(j), static_cast<int>(s));
  else journal_->step_updated(run_, static_cast<int>(j), static_cast<int>(s));
}

void RunEngine::set_job_state(std::size_t j, JobState to) {
  JobRecord& jr = run_.jobs[j];
  jr.state = to;
  if (to == JobState::Running) {
    jr.started = clock_.iso_now();
    jr.started_at = now();
    return;
  }
  if (!is_final(to)) return;
  jr.finished = clock_.iso_now();
  jr.finished_at = now();
  job_timeouts_.erase(j);
  if (journal_) journal_->job_finished(run_, plan_, static_cast<int>(j));
  if (observer_) observer_->on_job_finished(run_, plan_, static_cast<int>(j));
}

bool RunEngine::needs_done(std::size_t job) const {
  for (const auto& need : plan_.jobs[job].needs) {
    auto it = legs_by_name_.find(need);
    if (it == legs_by_name_.end()) continue;  // not selected in this run
    for (std::size_t leg : it->second)
      if (!is_final(run_.jobs[leg].state)) return false;
  }
  return true;
}

bool RunEngine::needs_succeeded(std::size_t job) const {
  for (const auto& need : plan_.jobs[job].needs) {
    auto it = legs_by_name_.find(need);
    if (it == legs_by_name_.end()) continue;
    for (std::size_t leg : it->second) {
      const JobRecord& r = run_.jobs[leg];
      // A failed job with continue-on-error counts as a success for its dependants, as in GitHub Actions.
      bool ok = r.state == JobState::Succeeded || (r.state == JobState::Failed && plan_.jobs[leg].continue_on_error);
      if (!ok) return false;
    }
  }
  return true;
}

void RunEngine::pump() {
  if (finished_) return;
  if (in_pump_) {  // a callback re-entered (a grant inside release): finish this pass, then go again
    pump_again_ = true;
    return;
  }
  in_pump_ = true;
  do {
    pump_again_ = false;
    for (std::size_t j = 0; j < plan_.jobs.size(); ++j) {
      JobRecord& jr = run_.jobs[j];
      // A job foreseen reused (engine_reuse.cpp) waits for nothing: none of its steps will run.
      const bool foreseen = j < foreseen_jobs_.size() && foreseen_jobs_[j];
      if (jr.state == JobState::Pending && (foreseen || needs_done(j)) && (!held(j) || run_.cancelled)) {
        const PlanJob& pj = plan_.jobs[j];
        if (run_.cancelled) {
          skip_job(j, JobState::Cancelled, "the run was cancelled");
          continue;
        }
        if (pj.toolchain && !foreseen) {
          auto lead = legs_by_name_.find("toolchain");
          bool lead_ok = lead != legs_by_name_.end() &&
                         run_.jobs[lead->second.front()].state == JobState::Succeeded;
          if (!lead_ok) {  // never run against an unverified toolchain, whatever its if: says
            skip_job(j, JobState::Skipped, "the toolchain lead job did not succeed");
            continue;
          }
        }
        if (pj.max_parallel > 0 && legs_by_name_[pj.name].size() > 1) {
          int running = 0;
          for (std::size_t leg : legs_by_name_[pj.name]) running += run_.jobs[leg].state == JobState::Running;
          if (running >= pj.max_parallel) continue;
        }
        ConditionContext ctx = flow_.context(j);
        ctx.any_failed = !foreseen && !needs_succeeded(j);
        ctx.cancelled = run_.cancelled;
        if (!evaluate_condition_text(pj.if_expr, ctx)) {
          skip_job(j, JobState::Skipped,
                   pj.if_expr.empty() ? "a job it needs did not succeed" : "if: " + pj.if_expr + " is false");
          continue;
        }
        start_job(j);
      }
      if (jr.state == JobState::Running) advance(j);
    }
  } while (pump_again_);
  in_pump_ = false;
  maybe_finish_run();
}

void RunEngine::start_job(std::size_t j) {
  set_job_state(j, JobState::Running);
  flow_.resolve_job(j);
  const PlanJob& pj = plan_.jobs[j];
  if (pj.timeout_minutes && !opts_.simulate)
    job_timeouts_[j] = clock_.after(*pj.timeout_minutes * 60, [this, j] {
      if (is_final(run_.jobs[j].state)) return;
      run_.jobs[j].timed_out = true;
      run_.jobs[j].failed = true;
      cancel_job(j, "job timeout-minutes reached");
      pump();
    });
}

void RunEngine::skip_job(std::size_t j, JobState state, const std::string& reason) {
  JobRecord& jr = run_.jobs[j];
  jr.reason = reason;
  for (std::size_t s = 0; s < jr.steps.size(); ++s) {
    if (is_final(jr.steps[s].state)) continue;
    transition(j, s, plan_.jobs[j].steps[s].deduplicated_from ? StepState::Deduplicated
                     : state == JobState::Cancelled          ? StepState::Cancelled
                                                             : StepState::Skipped);
  }
  set_job_state(j, state);
}

void RunEngine::advance(std::size_t j) {
  JobRecord& jr = run_.jobs[j];
  const PlanJob& pj = plan_.jobs[j];
  // The counts are kept by transition(): an event costs what it changes, not the job's length.
  JobTally& t = tally_[j];
  int active = t.active;
  bool all_final = t.final == jr.steps.size();
  if (all_final) {
    finish_job(j);
    return;
  }
  if (!pj.parallel) {
    // GitHub order: one step after another; after a failure only if: failure()/always() steps run.
    while (active == 0 && jr.next_step < jr.steps.size()) {
      const std::size_t s = jr.next_step++;
      if (!try_start_step(j, s)) continue;
      active = 1;
      // A split step's shards run at once: the others start with the first.
      while (pj.steps[s].shard && jr.next_step < jr.steps.size() && pj.steps[jr.next_step].collect_step == pj.steps[s].collect_step)
        try_start_step(j, jr.next_step++);
    }
  } else {
    // Parallel: every plain step at once (bounded by max-parallel and cards); steps whose if: calls a status
    // function (cleanup, reporting) run after the others, one by one, when their outcome is known.
    for (std::size_t s = std::max(jr.first_unsettled, t.scan_from); s < jr.steps.size(); ++s) {
      if (pj.steps[s].if_has_status_function || jr.steps[s].state != StepState::Pending) continue;
      // A shard waits for its split step's collection.
      if (pj.steps[s].shard && !is_final(jr.steps[static_cast<std::size_t>(pj.steps[s].collect_step)].state)) continue;
      if (pj.max_parallel > 0 && active >= pj.max_parallel) break;
      if (try_start_step(j, s)) ++active;
    }
    // Steps before first_unsettled are final, and before scan_from none plain is pending: skipped next time.
    while (jr.first_unsettled < jr.steps.size() && is_final(jr.steps[jr.first_unsettled].state)) ++jr.first_unsettled;
    while (t.scan_from < jr.steps.size() &&
           (jr.steps[t.scan_from].state != StepState::Pending || pj.steps[t.scan_from].if_has_status_function))
      ++t.scan_from;
    const bool plain_done = t.plain_final == t.plain;
    if (plain_done && active == 0)
      for (std::size_t s = 0; s < jr.steps.size(); ++s)
        if (jr.steps[s].state == StepState::Pending && try_start_step(j, s)) break;
  }
  all_final = t.final == jr.steps.size();
  if (all_final && !is_final(jr.state)) finish_job(j);
}

// Decides a pending step: deduplicated, skipped, or queued. Returns true when it was queued (it is active).
bool RunEngine::try_start_step(std::size_t j, std::size_t s) {
  JobRecord& jr = run_.jobs[j];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  if (ps.deduplicated_from) {
    transition(j, s, StepState::Deduplicated);
    return false;
  }
  ConditionContext ctx = flow_.context(j, s);
  ctx.any_failed = jr.failed;
  ctx.cancelled = jr.cancelled || run_.cancelled;
  if (jr.cancelled || run_.cancelled || !evaluate_condition_text(ps.if_expr, ctx)) {
    transition(j, s, (jr.cancelled || run_.cancelled) ? StepState::Cancelled : StepState::Skipped);
    return false;
  }
  if (ps.shard) {
    if (std::string why = shard_unrunnable(j, s); !why.empty()) {
      jr.steps[s].verdict = why;
      transition(j, s, StepState::Skipped);
      return false;
    }
  }
  if (reuse_step(j, s)) return false;
  enqueue(j, s);
  return true;
}

void RunEngine::enqueue(std::size_t j, std::size_t s) {
  StepRecord& sr = run_.jobs[j].steps[s];
  flow_.resolve_step(j, s);
  const PlanStep& ps = plan_.jobs[j].steps[s];
  // A step asking nothing of the host starts at once; one asking CPUs or memory waits for them in the queue.
  const bool asks_host = ps.cpus > 0 || ps.memory > 0;
  sr.wait_reason = ps.devices == 0 ? (asks_host ? "queued for " + host_share_words(ps.cpus, ps.memory) : "")
                                   : "queued for " + std::to_string(ps.devices) + (ps.devices == 1 ? " card" : " cards");
  transition(j, s, StepState::Waiting);
  if (ps.devices == 0 && !asks_host) {
    launch(j, s, {});
    return;
  }
  sr.queued_at = now();
  // The wait for cards is bounded by queue-timeout-minutes (task-submit --timeout) and by timeout-minutes,
  // whose clock starts now, as a GitHub step's counts task-submit's wait.
  std::optional<double> wait_limit;
  for (const auto& m : {ps.queue_timeout_minutes, ps.timeout_minutes})
    if (m) wait_limit = std::min(wait_limit.value_or(*m), *m);
  if (wait_limit && !opts_.simulate)
    wait_timeouts_[{j, s}] = clock_.after(*wait_limit * 60, [this, j, s, limit = *wait_limit] { wait_timed_out(j, s, limit); });
  // A default estimate is no estimate: such a step must not backfill ahead of a reservation. Simulated, every
  // step sleeps its (scaled) estimate, so it is exact: the expected starts then read in the run's time scale,
  // not the 5 real minutes an unknown length counts for.
  double expected = ps.expected_defaulted && !opts_.simulate ? 0 : ps.expected_minutes * 60 * (opts_.simulate ? opts_.time_scale : 1);
  sr.ticket = broker_.request(
      // A perf step's later samples: on the cards of its first (engine_perf.cpp).
      {ps.devices, ps.device_type, label(j, s), expected, sr.order, perf_cards(j, s), opts_.run_id, sr.avoid, ps.cpus, ps.memory},
      [this, j, s, asks_host](const std::vector<int>& cards) {
        StepRecord& r = run_.jobs[j].steps[s];
        if (asks_host) r.held = r.ticket;
        r.ticket = 0;
        launch(j, s, cards);
      },
      [this, j, s](const std::string& why) {
        StepRecord& r = run_.jobs[j].steps[s];
        r.ticket = 0;
        r.error = "no cards can serve this step: " + why;
        run_.infrastructure_failure = true;
        run_.infrastructure_problems.push_back(label(j, s) + ": " + r.error);
        if (!plan_.jobs[j].steps[s].continue_on_error) run_.jobs[j].failed = true;
        wait_timeouts_.erase({j, s});
        transition(j, s, StepState::Failed);
        pump();
      });
  if (!sr.order) sr.order = sr.ticket;
}

void RunEngine::wait_timed_out(std::size_t j, std::size_t s, double limit) {
  StepRecord& r = run_.jobs[j].steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  if (r.state != StepState::Waiting || !r.ticket) return;
  broker_.withdraw(r.ticket);
  r.ticket = 0;
  r.timed_out = true;
  r.error = "waited " + format_minutes(limit) + " for " +
            (ps.devices ? std::to_string(ps.devices) + " card(s)" : host_share_words(ps.cpus, ps.memory)) + " without getting them (" +
            (ps.queue_timeout_minutes && *ps.queue_timeout_minutes <= limit ? "queue-timeout-minutes" : "timeout-minutes") + ")";
  if (!ps.continue_on_error) run_.jobs[j].failed = true;
  transition(j, s, StepState::TimedOut);
  pump();
}

void RunEngine::launch(std::size_t j, std::size_t s, const std::vector<int>& cards, bool preflighted) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  if (jr.cancelled || run_.cancelled) {  // cancelled while waiting for the grant
    give_back_host(sr);
    if (!cards.empty()) broker_.release(cards);
    transition(j, s, StepState::Cancelled);
    pump();
    return;
  }
  // Cards this host handed out (not Slurm's) are checked first when the host says how (health.preflight).
  if (!preflighted && !cards.empty() && !opts_.health.preflight.empty() && !opts_.simulate && &executor_for(ps) == &executor_) {
    start_preflight(j, s, cards);
    return;
  }
  sr.attempt += 1;
  sr.cards = cards;
  sr.leased.clear();
  sr.lease_markers.clear();
  sr.charged.clear();
  sr.test_leases.clear();
  sr.test_lease_faults.clear();
  sr.node.clear();
  sr.executor_job.clear();
  sr.exit_code = -1;
  sr.signal = 0;
  sr.timed_out = false;
  fs::path dir = fs::path(run_logs(opts_.run_dir)) / (std::to_string(j + 1) + "-" + slug(plan_.jobs[j].id));
  fs::create_directories(dir);
  sr.log_path = (dir / (std::to_string(s + 1) + "-" + slug(ps.name) + ".log")).string();
  if (sr.attempt > 1) {
    std::ofstream(sr.log_path, std::ios::app) << "\npto-runner: "
                                              << (sr.perf && !sr.perf->samples.empty() ? "perf sample " + std::to_string(sr.perf->samples.size() + 1)
                                                                                        : "attempt " + std::to_string(sr.attempt))
                                              << "\n";
    flow_.forget_step_files(j, s);  // a retry starts with no file-command files
  }
  begin_perf_sample(j, s);

  StepLaunch l;
  l.label = label(j, s);
  l.command = ps.run;
  if (ps.kind == StepKind::ToolchainSetup)
    l.command = shell_quote(opts_.self_exe) + " --root " + shell_quote(opts_.root) + " toolchain setup " + opts_.toolchain_args +
                (opts_.run_as ? " --smoke-as " + shell_quote(opts_.run_as->name) : "") + " --output-env \"$PTO_RUNNER_OUTPUT_ENV\"";
  l.shell = ps.shell;
  fs::path wd = ps.working_directory.empty() ? fs::path(opts_.root) : fs::path(opts_.root) / ps.working_directory;
  l.working_directory = wd.lexically_normal().string();
  Executor& exec = executor_for(ps);
  if (opts_.simulate && &exec == &executor_) l.working_directory = opts_.root;  // simulated steps never touch the tree
  l.env = flow_.step_env(j, s, opts_.base_env, cards, opts_.path_first);
  l.log_path = sr.log_path;
  l.mask = opts_.mask;
  l.marker = ProcessMarker::for_step(run_.id, j, s, sr.attempt).text();
  wait_timeouts_.erase({j, s});
  // Running is bounded by run-timeout-minutes (task-submit --max-time) and by what timeout-minutes left
  // after the wait for cards.
  double waited = sr.queued_at >= 0 ? now() - sr.queued_at : 0;
  if (ps.run_timeout_minutes) l.timeout_seconds = *ps.run_timeout_minutes * 60;
  if (ps.timeout_minutes) {
    double left = std::max(0.001, *ps.timeout_minutes * 60 - waited);
    l.timeout_seconds = l.timeout_seconds > 0 ? std::min(l.timeout_seconds, left) : left;
  }
  // Its named caches, in the tier this run writes (caches/cache_tiers); a ccache's statistics come back in a log.
  if (opts_.caches)
    for (const auto& [name, var] : ps.caches)
      for (const auto& [k, v] : opts_.caches->step_env(name, var, cache_stats_log(j, s, name))) set_env(l.env, k, v);
  l.grace_seconds = opts_.kill_grace_seconds;
  l.log_max_bytes = opts_.log_max_bytes;
  if (opts_.step_lease_token && ps.kind != StepKind::ToolchainSetup)
    set_env(l.env, "PTO_RUNNER_LEASE_TOKEN", opts_.step_lease_token(j, s, l.timeout_seconds));
  if (opts_.run_as && ps.kind != StepKind::ToolchainSetup) {
    // Its user's own places (the lead job and health checks, run as root, keep the daemon's: nothing the
    // run's user wrote is read by a root process).
    set_env(l.env, "USER", opts_.run_as->name);
    set_env(l.env, "LOGNAME", opts_.run_as->name);
    set_env(l.env, "HOME", run_home(opts_.run_dir));
    set_env(l.env, "TMPDIR", run_temp(opts_.run_dir));
    set_env(l.env, "RUNNER_TEMP", run_temp(opts_.run_dir));
  }
  if (std::string e = prepare_tests(j, s, l); !e.empty()) {
    // The host could not give it a place for its reports: it fails as a step that could not start.
    run_.infrastructure_failure = true;
    run_.infrastructure_problems.push_back(label(j, s) + ": " + e);
    wait_timeouts_.erase({j, s});
    transition(j, s, StepState::Running);
    boost::asio::post(io_, [this, j, s, e] {
      StepOutcome o;
      o.error = e;
      on_done(j, s, o);
    });
    return;
  }
  l.simulated_seconds = ps.expected_minutes * 60 * opts_.time_scale;
  l.on_line = [this, j, s](std::string_view line) {
    if (observer_) observer_->on_step_output(run_, plan_, static_cast<int>(j), static_cast<int>(s), line);
  };
  l.devices = ps.devices;
  l.device_type = ps.device_type;
  if (!cards.empty()) l.hold_fds = broker_.lock_fds(cards);
  if (opts_.run_as && ps.kind != StepKind::ToolchainSetup) {
    // The pull request's code: as the run's own user, in limits it cannot raise, opening its cards only.
    l.run_as = opts_.run_as;
    l.limits = opts_.limits;
    for (int card : cards)
      for (const std::string& f : card_files_of(opts_.card_files, card)) l.card_files.push_back(f);
  }
  // What it asked of the host is also what it may use: cpu.max and memory.max (the tighter of its own and
  // the sandbox's memory-max).
  if (ps.cpus) l.limits.cpus = ps.cpus;
  if (ps.memory && (!l.limits.memory_max || ps.memory <= l.limits.memory_max)) l.limits.memory_max = ps.memory, l.limits.memory_asked = true;
  if (exec.places(l)) {
    // Slurm picks the node and the cards: the step waits in Slurm's queue (with Slurm's reason) and starts
    // when the executor says where. Its three clocks go to the executor: timeout-minutes (what is left) from
    // now, queue-timeout-minutes until it is placed, run-timeout-minutes from then.
    l.timeout_seconds = ps.timeout_minutes ? std::max(0.001, *ps.timeout_minutes * 60 - waited) : 0;
    l.wait_timeout_seconds = ps.queue_timeout_minutes ? *ps.queue_timeout_minutes * 60 : 0;
    l.run_timeout_seconds = ps.run_timeout_minutes ? *ps.run_timeout_minutes * 60 : 0;
    sr.wait_reason = "submitted; waiting for the cluster to place it";
    l.on_waiting = [this, j, s](const std::string& reason) {
      StepRecord& r = run_.jobs[j].steps[s];
      if (r.state == StepState::Waiting) r.wait_reason = reason;
    };
    l.on_placed = [this, j, s](const Placement& p) {
      StepRecord& r = run_.jobs[j].steps[s];
      if (r.state != StepState::Waiting) return;
      r.cards = p.cards;
      r.node = p.node;
      r.executor_job = p.job;
      r.wait_reason.clear();
      transition(j, s, StepState::Running);
      trace("exec", p.cards);
    };
    // Its new attempt is kept before it is handed over (no transition says so until it is placed): a daemon
    // that takes the run over before then submits it again as the next attempt, never under this one's marker.
    kept(j, s, false);
    sr.handle = start_processes(exec, std::move(l), [this, j, s](const StepOutcome& o) { on_done(j, s, o); });
    return;
  }
  sr.wait_reason.clear();
  transition(j, s, StepState::Running);
  sr.handle = start_processes(exec, std::move(l), [this, j, s](const StepOutcome& o) { on_done(j, s, o); });
  trace("exec", cards);  // the local executor returns once posix_spawn has exec'd the shell
}

void RunEngine::trace(const char* what, const std::vector<int>& cards) {
  if (opts_.trace_file.empty() || cards.empty()) return;
  // Real time, whatever the engine's clock: this measures the host's hand-over (bench/release_latency.sh).
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(steady_now().time_since_epoch()).count();
  std::ofstream(opts_.trace_file, std::ios::app) << what << " " << ns << " " << join_ids(cards) << "\n";
}

void RunEngine::on_done(std::size_t j, std::size_t s, const StepOutcome& o) {
  StepRecord& sr = run_.jobs[j].steps[s];
  sr.handle = 0;
  sr.exit_code = o.exit_code;
  sr.signal = o.signal;
  sr.timed_out = o.timed_out;
  sr.error = !o.limit_reached.empty() ? o.limit_reached : o.error;
  const double ended = now();
  // A step still in the cluster's queue (never placed) ran nowhere.
  if (sr.started_at >= 0 && sr.state == StepState::Running) sr.intervals.push_back({sr.started_at, ended, sr.cards, sr.attempt});
  // Output that could not be kept (a full disk) is the host's failure, whatever the step did.
  if (!o.log_error.empty()) {
    run_.infrastructure_failure = true;
    run_.infrastructure_problems.push_back(label(j, s) + ": " + o.log_error);
  }
  if (!o.survivors.empty()) {
    run_.infrastructure_failure = true;
    run_.infrastructure_problems.push_back(label(j, s) + ": " + o.survivors);
  }
  judge_attempt_end(j, s, o);
  // The executor may forget this end once we return (a supervisor drops it when told it was read): what was
  // journaled of it is kept first.
  if (journal_) journal_->durable();
}

std::string RunEngine::cache_stats_log(std::size_t j, std::size_t s, const std::string& name) const {
  return run_ccache_stats(opts_.run_dir, std::to_string(j + 1) + "-" + std::to_string(s + 1) + "-" + std::to_string(run_.jobs[j].steps[s].attempt), name);
}

std::map<std::string, CacheCounts> RunEngine::read_cache_stats(const std::vector<std::pair<std::string, std::string>>& logs) {
  // A build of thousands of files writes a few hundred KiB; more than 4 MiB is not ccache's.
  std::map<std::string, CacheCounts> out;
  for (const auto& [name, path] : logs) {
    std::string text, error;
    if (read_regular_file(path, 4 << 20, text, error)) out[name] += parse_ccache_stats_log(text);
    std::error_code ec;
    fs::remove(path, ec);  // a retry counts its own calls
  }
  return out;
}

void RunEngine::add_cache_counts(StepRecord& sr, const std::map<std::string, CacheCounts>& counts) {
  for (const auto& [name, c] : counts) sr.caches[name] += c;
}

void RunEngine::judge_attempt_end(std::size_t j, std::size_t s, const StepOutcome& o) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  const bool cancelled = o.cancelled || (jr.cancelled && !o.timed_out) || run_.cancelled;
  const bool judge_tests = ps.tests.any() && ps.kind != StepKind::CollectTests && !cancelled && !o.timed_out && o.error.empty() && !opts_.simulate;
  // Its ccaches' statistics logs, read with its reports (a step writes them: they are the step's files).
  std::vector<std::pair<std::string, std::string>> stats;
  if (opts_.caches && !opts_.simulate)
    for (const auto& [name, var] : ps.caches)
      if (RunCaches::is_ccache(var)) stats.push_back({name, cache_stats_log(j, s, name)});
  if ((!judge_tests && stats.empty()) || !opts_.offload) {
    add_cache_counts(sr, read_cache_stats(stats));
    finish_attempt(j, s, o, cancelled, judge_tests, judge_tests ? read_junit_reports(report_query(j, s)) : ParsedReports{});
    return;
  }
  // Its reports are read elsewhere (a pull request's may be hundreds of MiB): the engine goes on meanwhile, the
  // step still running to everyone. Its end is kept first, so a daemon that takes the run over before they are
  // read reads them again (engine/engine_adopt.cpp) instead of finding the step's processes lost.
  sr.ended = o;
  kept(j, s, false);
  auto read = std::make_shared<ParsedReports>();
  auto counts = std::make_shared<std::map<std::string, CacheCounts>>();
  opts_.offload(
      [read, counts, judge_tests, stats, q = report_query(j, s)] {
        if (judge_tests) *read = read_junit_reports(q);
        *counts = read_cache_stats(stats);
      },
      [this, j, s, o, read, counts, cancelled, judge_tests] {
        add_cache_counts(run_.jobs[j].steps[s], *counts);
        finish_attempt(j, s, o, cancelled, judge_tests, std::move(*read));
      });
}

void RunEngine::finish_attempt(std::size_t j, std::size_t s, const StepOutcome& o, bool cancelled, bool judge_tests, ParsedReports reports) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  sr.ended.reset();
  // Cards the executor placed the step on (Slurm) were never the broker's to give back.
  std::vector<int> cards = sr.executor_job.empty() ? sr.cards : std::vector<int>{};
  // A failed attempt is charged to its cause (engine/failure_evidence), and to its cards when they caused it.
  const StepRecord::Failure* failure = nullptr;
  // A step with `tests:` is judged by its test cases first (engine/engine_cases.cpp); `rerun_tests`: its
  // retry runs only the tests not yet passed.
  // `muted_exit`: its non-zero exit is only its muted tests' failures.
  bool rerun_tests = false, muted_exit = false;
  if (judge_tests) failure = take_tests(j, s, o, std::move(reports), rerun_tests, muted_exit);
  if (!failure && !o.ok() && !cancelled && !muted_exit) failure = &record_failure(j, s, o);
  const bool infra = failure && (failure->evidence.cause == FailureCause::Card || failure->evidence.cause == FailureCause::Infra);
  const bool retriable = failure && !rerun_tests && sr.tests_error.empty() && sr.error.empty() && o.error.empty() && o.limit_reached.empty() &&
                         ps.retry.retries(failure->evidence.cause, sr.attempt) &&
                         (ps.retry.on_exit_codes.empty() ||
                          std::count(ps.retry.on_exit_codes.begin(), ps.retry.on_exit_codes.end(), o.exit_code));
  if (observer_ && failure) observer_->on_attempt_failed(run_, plan_, static_cast<int>(j), static_cast<int>(s), *failure, retriable || rerun_tests);
  sr.tests_rerun = rerun_tests;
  if (rerun_tests) {
    // Only the tests not yet passed, never on the cards they broke.
    for (int c : failure->evidence.cards)
      if (!std::count(sr.avoid.begin(), sr.avoid.end(), c)) sr.avoid.push_back(c);
    std::ofstream(sr.log_path, std::ios::app) << "pto-runner: " << to_string(failure->evidence.cause) << ": " << failure->evidence.reason
                                              << "; rerunning " << sr.tests_summary.unresolved.size() << " test(s)"
                                              << (sr.avoid.empty() ? "" : " on other cards than " + join_ids(sr.avoid)) << " (attempt "
                                              << sr.attempt + 1 << ")\n";
    give_back_host(sr);
    release_cards(cards, infra, label(j, s));
    sr.cards.clear();
    enqueue(j, s);
    pump();
    return;
  }
  if (retriable) {
    // Elsewhere: never the cards it was charged to (or, for a failure of the code, the cards it ran on).
    if (ps.retry.elsewhere) {
      const auto& away = failure->evidence.cards.empty() ? sr.cards : failure->evidence.cards;
      for (int c : away)
        if (!std::count(sr.avoid.begin(), sr.avoid.end(), c)) sr.avoid.push_back(c);
    }
    std::ofstream(sr.log_path, std::ios::app) << "pto-runner: " << to_string(failure->evidence.cause) << ": " << failure->evidence.reason
                                              << "; retrying" << (ps.retry.elsewhere && !sr.avoid.empty() ? " on other cards than " + join_ids(sr.avoid) : "")
                                              << " (attempt " << sr.attempt + 1 << ")\n";
    give_back_host(sr);
    release_cards(cards, infra, label(j, s));
    sr.cards.clear();
    enqueue(j, s);  // Running -> Waiting: journaled and notified as the attempt's end
    pump();
    return;
  }
  // The final attempt's $GITHUB_ENV/PATH/OUTPUT count, whatever its result (as in GitHub); a malformed one
  // fails the step.
  std::string file_error;
  const auto env_before = jr.file_env;
  const auto path_before = jr.path_prepend;
  if (o.error.empty() && !flow_.take_step_files(j, s, file_error)) sr.error = file_error;
  sr.wrote_env = jr.file_env != env_before || jr.path_prepend != path_before;  // later steps read it: not reusable
  if (!o.limit_reached.empty()) sr.error = o.limit_reached;
  // A split step's collection that ran well: its tests split across its shards (or why they cannot be).
  if (ps.kind == StepKind::CollectTests && o.ok() && sr.error.empty() && !cancelled && !opts_.simulate)
    if (std::string e = take_collection(j, s); !e.empty()) {
      sr.error = e;
      sr.cause = "code";
      sr.verdict = "failed: " + e;
    }
  // A perf step's sample that ran well: its number taken, and another sample queued while more are wanted.
  if (ps.perf && !opts_.simulate && o.ok() && sr.error.empty() && !failure && !cancelled && take_perf_sample(j, s, cards)) return;
  StepState to;
  // Green by its exit, unless its tests say otherwise ("ran no tests"), or by its tests after a rerun of
  // only those not yet passed (its exit then says how the rerun went).
  if ((o.ok() || muted_exit) && sr.error.empty() && !(failure && judge_tests)) {
    to = StepState::Succeeded;
    if (ps.kind == StepKind::ToolchainSetup) {
      std::ifstream in(run_toolchain_env(opts_.run_dir));
      std::string line;
      while (std::getline(in, line)) {
        auto eq = line.find('=');
        if (eq != std::string::npos && eq > 0) run_.toolchain_env[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
  } else if (cancelled) {
    to = StepState::Cancelled;
  } else {
    to = o.timed_out ? StepState::TimedOut : StepState::Failed;
    if (ps.kind == StepKind::ToolchainSetup) {
      run_.infrastructure_failure = true;
      run_.infrastructure_problems.push_back("toolchain setup failed; see " + sr.log_path);
    }
    if (!ps.continue_on_error) jr.failed = true;
  }
  if (to == StepState::Succeeded || to == StepState::Failed || to == StepState::TimedOut) {
    settle_verdict(j, s, to);
    settle_tests_verdict(j, s, to);
  }
  // Report first, then hand the cards on: the next step's start is announced after this step's end.
  transition(j, s, to);
  if ((to == StepState::Failed || to == StepState::TimedOut) && !ps.continue_on_error) fail_fast(j);
  give_back_host(sr);
  release_cards(cards, infra, label(j, s));
  pump();
}

void RunEngine::fail_fast(std::size_t j) {
  const PlanJob& pj = plan_.jobs[j];
  if (!pj.fail_fast || legs_by_name_[pj.name].size() < 2) return;
  const std::string why = "fail-fast: " + pj.id + " failed";
  // Legs not started yet first: stopping a running one may end it at once, and the pass that follows must not
  // start a leg in its place.
  for (std::size_t leg : legs_by_name_[pj.name])
    if (leg != j && run_.jobs[leg].state == JobState::Pending) skip_job(leg, JobState::Cancelled, why);
  for (std::size_t leg : legs_by_name_[pj.name])
    if (leg != j && run_.jobs[leg].state == JobState::Running) cancel_job(leg, why);
}

void RunEngine::cancel_job(std::size_t j, const std::string& reason) {
  JobRecord& jr = run_.jobs[j];
  jr.cancelled = true;
  if (jr.reason.empty()) jr.reason = reason;
  // Kept before anything else happens: its running steps end only later, and a daemon that takes the run
  // over meanwhile must find the job cancelled (and timed out, if that is why).
  if (journal_) journal_->run_changed(run_);
  for (std::size_t s = 0; s < jr.steps.size(); ++s) {
    StepRecord& sr = jr.steps[s];
    const PlanStep& ps = plan_.jobs[j].steps[s];
    if (sr.state == StepState::Waiting && sr.ticket) {  // in the card queue (a first attempt or a retry)
      broker_.withdraw(sr.ticket);
      sr.ticket = 0;
      wait_timeouts_.erase({j, s});
      transition(j, s, StepState::Cancelled);
    } else if ((sr.state == StepState::Running || sr.state == StepState::Waiting) && sr.handle) {  // Waiting: in Slurm's queue
      signal_processes(executor_for(ps), sr.handle);  // on_done ends it, once its processes are gone
    } else if (sr.state == StepState::Waiting && preflights_.count({j, s})) {
      const std::vector<std::uint64_t> handles = preflights_[{j, s}];  // a copy: their ends erase the entry
      for (auto h : handles) signal_processes(executor_, h);  // finish_preflight cancels the step
    } else if (sr.state == StepState::Waiting && sr.perf && sr.perf->awaiting_pair) {  // a perf step between samples
      sr.perf->awaiting_pair = false;
      transition(j, s, StepState::Cancelled);
    } else if (sr.state == StepState::Pending) {
      transition(j, s, ps.deduplicated_from ? StepState::Deduplicated : StepState::Cancelled);
    }
  }
}

void RunEngine::finish_job(std::size_t j) {
  JobRecord& jr = run_.jobs[j];
  flow_.finish_job(j);
  set_job_state(j, jr.timed_out ? JobState::Failed
                   : jr.failed   ? JobState::Failed
                   : jr.cancelled ? JobState::Cancelled
                                  : JobState::Succeeded);
}

void RunEngine::cancel(int signal, const std::string& reason) {
  if (finished_ || run_.cancelled) return;
  run_.cancelled = true;
  run_.cancel_signal = signal;
  run_.cancel_reason = reason;
  if (journal_) journal_->run_changed(run_);
  const std::string why = reason.empty() ? "the run was cancelled" : reason;
  for (std::size_t j = 0; j < run_.jobs.size(); ++j) {
    if (run_.jobs[j].state == JobState::Pending) skip_job(j, JobState::Cancelled, why);
    else if (run_.jobs[j].state == JobState::Running) cancel_job(j, why);
  }
  for (const auto& [card, handle] : health_checks_) signal_processes(executor_, handle);  // a cancelled check counts as neither
  pump();
}

void RunEngine::supersede(const std::string& newer_run) {
  if (finished_ || run_.cancelled) return;
  run_.superseded_by = newer_run;
  cancel(0, "superseded by run " + newer_run + " of the same pull request");
}

void RunEngine::abort(const std::string& problem) {
  if (finished_) return;
  run_.infrastructure_failure = true;
  run_.infrastructure_problems.push_back(problem);
  cancel(0);
}

void RunEngine::release_finish() {
  if (finish_holds_ > 0) --finish_holds_;
  boost::asio::post(io_, [this] { maybe_finish_run(); });
}

void RunEngine::set_control(std::size_t j, std::size_t s, StepRecord::Control control) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (!control.note.empty()) sr.verdict = sr.verdict.empty() ? control.note : sr.verdict + "; " + control.note;
  sr.control = std::move(control);
  kept(j, s, true);
}

void RunEngine::maybe_finish_run() {
  if (finished_ || !started_ || finish_holds_ > 0) return;
  for (const auto& j : run_.jobs)
    if (!is_final(j.state)) return;
  if (!health_checks_.empty()) return;  // cards still held by a check; it calls pump() when it ends
  // A step is final only after the executor reported its processes gone, so nothing of this run is alive.
  finished_ = true;
  run_.finished = clock_.iso_now();
  if (observer_) observer_->on_run_finished(run_, plan_);
  if (on_finished_) boost::asio::post(io_, on_finished_);
}

ExitCode RunEngine::result() const {
  if (run_.cancel_signal == SIGINT) return ExitCode::Interrupted;
  if (run_.cancel_signal == SIGTERM) return ExitCode::Terminated;
  if (run_.infrastructure_failure) return ExitCode::Infrastructure;
  for (std::size_t j = 0; j < run_.jobs.size(); ++j) {
    JobState s = run_.jobs[j].state;
    if ((s == JobState::Failed || s == JobState::Cancelled) && !plan_.jobs[j].continue_on_error) return ExitCode::Failure;
  }
  return ExitCode::Success;
}

}  // namespace pto
