#include "engine/engine.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "config/device_spec.h"
#include "config/project.h"
#include "engine/file_commands.h"
#include "plan/condition.h"
#include "plan/expression.h"
#include "sched/device_pool.h"
#include "util/process_env.h"
#include "util/random_hex.h"
#include "util/steady_seconds.h"

namespace fs = std::filesystem;

namespace pto {

EngineOptions make_engine_options(const std::string& root, const std::string& state_dir, const RunnerConfig& cfg, bool simulate, double time_scale,
                                  const std::string& drop_env_prefix) {
  EngineOptions eo;
  eo.run_id = make_run_id();
  eo.root = fs::absolute(root).lexically_normal().string();
  eo.run_dir = state_dir + "/runs/" + eo.run_id;
  eo.simulate = simulate;
  eo.time_scale = simulate ? time_scale : 1;
  eo.kill_grace_seconds = cfg.kill_grace_seconds;
  eo.log_max_bytes = cfg.log_max_bytes;
  eo.base_env = environment_map(drop_env_prefix);
  eo.self_exe = self_executable();
  // The lead job's host settings, resolved here once: it then reads nothing of the host from ROOT.
  eo.toolchain_args = "--cache-dir " + shell_quote(resolve_under_root(eo.root, cfg.cache_dir));
  if (!cfg.toolchain_mirror.empty())
    eo.toolchain_args += " --mirror " + shell_quote(cfg.toolchain_mirror.find("://") == std::string::npos
                                                        ? resolve_under_root(eo.root, cfg.toolchain_mirror)
                                                        : cfg.toolchain_mirror);
  eo.health = cfg.health;
  return eo;
}

std::string make_run_id() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + random_hex(2);
}

std::string format_minutes(double minutes) {
  char buf[32];
  if (minutes >= 1 && minutes == static_cast<long>(minutes)) std::snprintf(buf, sizeof(buf), "%ld min", static_cast<long>(minutes));
  else std::snprintf(buf, sizeof(buf), "%.3g s", minutes * 60);
  return buf;
}

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    if (ok) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
  if (out.size() > 80) out.resize(80);
  return out.empty() ? "step" : out;
}

struct RunEngine::Timers {
  explicit Timers(boost::asio::io_context& io) : io(io) {}
  boost::asio::io_context& io;
  std::map<std::size_t, std::unique_ptr<boost::asio::steady_timer>> job_timeouts;
  /// A step waiting for cards under timeout-minutes or queue-timeout-minutes.
  std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<boost::asio::steady_timer>> wait_timeouts;
};

RunEngine::RunEngine(boost::asio::io_context& io, Plan plan, CardBroker& broker, Executor& executor,
                     EngineOptions opts, RunObserver* observer)
    : io_(io),
      plan_(std::move(plan)),
      broker_(broker),
      executor_(executor),
      opts_(std::move(opts)),
      observer_(observer),
      timers_(std::make_unique<Timers>(io)) {
  run_.id = opts_.run_id.empty() ? make_run_id() : opts_.run_id;
  run_.created = iso_now();
  for (std::size_t j = 0; j < plan_.jobs.size(); ++j) {
    JobRecord jr;
    jr.steps.resize(plan_.jobs[j].steps.size());
    for (auto& s : jr.steps) s.created = run_.created;
    run_.jobs.push_back(std::move(jr));
    legs_by_name_[plan_.jobs[j].name].push_back(j);
  }
}

RunEngine::~RunEngine() = default;

double RunEngine::now() const { return steady_seconds() - t0_; }

void RunEngine::start() {
  started_ = true;
  t0_ = steady_seconds();
  fs::create_directories(fs::path(opts_.run_dir) / "logs");
  fs::create_directories(fs::path(opts_.run_dir) / "files");
  boost::asio::post(io_, [this] { pump(); });
}

std::string RunEngine::label(std::size_t job, std::size_t step) const {
  return plan_.jobs[job].id + " / " + plan_.jobs[job].steps[step].name;
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
      if (jr.state == JobState::Pending && needs_done(j)) {
        const PlanJob& pj = plan_.jobs[j];
        if (run_.cancelled) {
          skip_job(j, JobState::Cancelled, "the run was cancelled");
          continue;
        }
        if (pj.toolchain) {
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
        ConditionContext ctx = context(j, std::string::npos);
        ctx.any_failed = !needs_succeeded(j);
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
  JobRecord& jr = run_.jobs[j];
  jr.state = JobState::Running;
  jr.started = iso_now();
  jr.started_at = now();
  // needs.*.outputs in the job's env are known now that its needs have ended.
  ConditionContext ctx = context(j, std::string::npos);
  for (auto& [k, v] : plan_.jobs[j].env) v = interpolate(v, ctx);
  const PlanJob& pj = plan_.jobs[j];
  if (pj.timeout_minutes && !opts_.simulate) {
    auto t = std::make_unique<boost::asio::steady_timer>(io_);
    t->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(*pj.timeout_minutes * 60)));
    t->async_wait([this, j](boost::system::error_code ec) {
      if (ec || is_final(run_.jobs[j].state)) return;
      run_.jobs[j].timed_out = true;
      run_.jobs[j].failed = true;
      cancel_job(j, "job timeout-minutes reached");
      pump();
    });
    timers_->job_timeouts[j] = std::move(t);
  }
}

void RunEngine::skip_job(std::size_t j, JobState state, const std::string& reason) {
  JobRecord& jr = run_.jobs[j];
  jr.state = state;
  jr.reason = reason;
  jr.finished = iso_now();
  jr.finished_at = now();
  for (std::size_t s = 0; s < jr.steps.size(); ++s) {
    StepRecord& sr = jr.steps[s];
    if (is_final(sr.state)) continue;
    sr.state = plan_.jobs[j].steps[s].deduplicated_from ? StepState::Deduplicated
               : state == JobState::Cancelled          ? StepState::Cancelled
                                                       : StepState::Skipped;
    sr.finished = jr.finished;
  }
  if (observer_) observer_->on_job_finished(run_, plan_, static_cast<int>(j));
}

void RunEngine::advance(std::size_t j) {
  JobRecord& jr = run_.jobs[j];
  const PlanJob& pj = plan_.jobs[j];
  // One pass to count; the loops below keep the count current, so a 1,000-step job stays linear per event.
  int active = 0;
  bool all_final = true;
  for (const auto& s : jr.steps) {
    active += s.state == StepState::Waiting || s.state == StepState::Running;
    all_final = all_final && is_final(s.state);
  }
  if (all_final) {
    finish_job(j);
    return;
  }
  if (!pj.parallel) {
    // GitHub order: one step after another; after a failure only if: failure()/always() steps run.
    while (active == 0 && jr.next_step < jr.steps.size())
      if (try_start_step(j, jr.next_step++)) active = 1;
  } else {
    // Parallel: every plain step at once (bounded by max-parallel and cards); steps whose if: calls a status
    // function (cleanup, reporting) run after the others, one by one, when their outcome is known.
    bool plain_done = true;
    for (std::size_t s = jr.first_unsettled; s < jr.steps.size(); ++s) {
      if (pj.steps[s].if_has_status_function) continue;
      if (jr.steps[s].state == StepState::Pending) {
        if (pj.max_parallel > 0 && active >= pj.max_parallel) {
          plain_done = false;
          break;
        }
        if (try_start_step(j, s)) ++active;
      }
      if (!is_final(jr.steps[s].state)) plain_done = false;
    }
    // Steps before first_unsettled are final; skip them next time.
    while (jr.first_unsettled < jr.steps.size() && is_final(jr.steps[jr.first_unsettled].state)) ++jr.first_unsettled;
    if (plain_done && active == 0)
      for (std::size_t s = 0; s < jr.steps.size(); ++s)
        if (jr.steps[s].state == StepState::Pending && try_start_step(j, s)) break;
  }
  all_final = std::all_of(jr.steps.begin() + static_cast<std::ptrdiff_t>(jr.first_unsettled), jr.steps.end(),
                          [](const StepRecord& s) { return is_final(s.state); });
  if (all_final) finish_job(j);
}

// Decides a pending step: deduplicated, skipped, or queued. Returns true when it was queued (it is active).
bool RunEngine::try_start_step(std::size_t j, std::size_t s) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  if (ps.deduplicated_from) {
    sr.state = StepState::Deduplicated;
    sr.finished = iso_now();
    if (observer_) observer_->on_step_finished(run_, plan_, static_cast<int>(j), static_cast<int>(s));
    return false;
  }
  ConditionContext ctx = context(j, s);
  ctx.any_failed = jr.failed;
  ctx.cancelled = jr.cancelled || run_.cancelled;
  if (jr.cancelled || run_.cancelled || !evaluate_condition_text(ps.if_expr, ctx)) {
    sr.state = (jr.cancelled || run_.cancelled) ? StepState::Cancelled : StepState::Skipped;
    sr.finished = iso_now();
    if (observer_) observer_->on_step_finished(run_, plan_, static_cast<int>(j), static_cast<int>(s));
    return false;
  }
  enqueue(j, s);
  return true;
}

ConditionContext RunEngine::context(std::size_t j, std::size_t step) const {
  const PlanJob& pj = plan_.jobs[j];
  const JobRecord& jr = run_.jobs[j];
  ConditionContext ctx;
  for (const auto& [k, v] : pj.matrix) ctx.matrix[k] = v;
  // The env context as GitHub builds it: $GITHUB_ENV values, then the job's env, then the step's.
  ctx.env = jr.file_env;
  for (const auto& [k, v] : pj.env) ctx.env[k] = v;
  if (step != std::string::npos)
    for (const auto& [k, v] : pj.steps[step].env) ctx.env[k] = v;
  auto outcome = [](StepState st) -> std::string {
    switch (st) {
      case StepState::Succeeded: case StepState::Deduplicated: return "success";
      case StepState::Failed: case StepState::TimedOut: return "failure";
      case StepState::Cancelled: case StepState::Interrupted: return "cancelled";
      default: return "skipped";
    }
  };
  for (std::size_t k = 0; k < pj.steps.size(); ++k) {
    if (pj.steps[k].id.empty() || !is_final(jr.steps[k].state) || k == step) continue;
    // A deduplicated step did its work as the step it repeats: it has that step's outputs.
    std::size_t from = pj.steps[k].deduplicated_from ? static_cast<std::size_t>(*pj.steps[k].deduplicated_from) : k;
    const std::string prefix = "steps." + pj.steps[k].id + ".";
    for (const auto& [name, value] : jr.steps[from].outputs) ctx.values[prefix + "outputs." + name] = value;
    std::string o = outcome(jr.steps[from].state);
    ctx.values[prefix + "outcome"] = o;
    ctx.values[prefix + "conclusion"] = o == "failure" && pj.steps[k].continue_on_error ? "success" : o;
  }
  for (const auto& need : pj.needs) {
    auto it = legs_by_name_.find(need);
    if (it == legs_by_name_.end()) continue;
    // A matrix job's legs: the outputs of the leg that finished last win, as in GitHub.
    std::vector<std::size_t> legs = it->second;
    std::sort(legs.begin(), legs.end(), [&](std::size_t a, std::size_t b) {
      return run_.jobs[a].finished_at < run_.jobs[b].finished_at;
    });
    std::string result = "success";
    int skipped = 0;
    for (std::size_t leg : legs) {
      const JobRecord& r = run_.jobs[leg];
      for (const auto& [name, value] : r.outputs)
        if (!value.empty()) ctx.values["needs." + need + ".outputs." + name] = value;
      if (r.state == JobState::Failed && !plan_.jobs[leg].continue_on_error) result = "failure";
      else if (r.state == JobState::Cancelled && result != "failure") result = "cancelled";
      skipped += r.state == JobState::Skipped;
    }
    if (skipped == static_cast<int>(legs.size())) result = "skipped";
    ctx.values["needs." + need + ".result"] = result;
  }
  return ctx;
}

// Replaces the step's ${{ }} (steps.*, needs.*, env.*) once, when it first becomes runnable: everything it
// can read has happened by then (earlier steps have ended; plan checks forbid reading later ones).
void RunEngine::resolve_step(std::size_t j, std::size_t s) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (sr.resolved) return;
  sr.resolved = true;
  PlanStep& ps = plan_.jobs[j].steps[s];
  ConditionContext job_ctx = context(j, std::string::npos);
  for (auto& [k, v] : ps.env) v = interpolate(v, job_ctx);  // step env reads the job-level env context
  ConditionContext ctx = context(j, s);
  ps.run = interpolate(ps.run, ctx);
  ps.name = interpolate(ps.name, ctx);
  ps.working_directory = interpolate(ps.working_directory, ctx);
}

std::string RunEngine::files_dir(std::size_t j, std::size_t s) const {
  return opts_.run_dir + "/files/" + std::to_string(j + 1) + "-" + std::to_string(s + 1);  // a name prefix
}

bool RunEngine::read_file_commands(std::size_t j, std::size_t s, std::string& error) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const std::string dir = files_dir(j, s);
  std::string env_text, path_text, output_text;
  if (!read_step_file(dir + ".env", env_text, error) || !read_step_file(dir + ".path", path_text, error) ||
      !read_step_file(dir + ".output", output_text, error))
    return false;
  NameValues env, outputs;
  if (!parse_name_value_file(env_text, env, error)) {
    error = "$GITHUB_ENV " + error;
    return false;
  }
  if (!parse_name_value_file(output_text, outputs, error)) {
    error = "$GITHUB_OUTPUT " + error;
    return false;
  }
  for (auto& [k, v] : outputs) sr.outputs[k] = v;
  // pto-runner's own variables are not the step's to change (the marker finds its escaped processes).
  for (auto& [k, v] : env)
    if (k.rfind("PTO_RUNNER_", 0) != 0) jr.file_env[k] = v;
  for (auto& p : parse_path_file(path_text)) jr.path_prepend.insert(jr.path_prepend.begin(), p);
  // Its summary joins the run's (as GitHub shows every step's under the job); over GitHub's 1 MiB it is left
  // out and said so, without failing the step.
  std::string summary_error;
  if (!read_step_file(dir + ".summary", sr.summary, summary_error))
    sr.summary = "*(" + label(j, s) + ": its step summary is left out: " + summary_error + ")*\n";
  return true;
}

void RunEngine::enqueue(std::size_t j, std::size_t s) {
  StepRecord& sr = run_.jobs[j].steps[s];
  resolve_step(j, s);
  const PlanStep& ps = plan_.jobs[j].steps[s];
  sr.state = StepState::Waiting;
  if (sr.runnable_at < 0) {
    sr.runnable = iso_now();
    sr.runnable_at = now();
  }
  if (ps.devices == 0) {
    launch(j, s, {});
    return;
  }
  sr.queued_at = now();
  // The wait for cards is bounded by queue-timeout-minutes (task-submit --timeout) and by timeout-minutes,
  // whose clock starts now, as a GitHub step's counts task-submit's wait.
  std::optional<double> wait_limit;
  for (const auto& m : {ps.queue_timeout_minutes, ps.timeout_minutes})
    if (m) wait_limit = std::min(wait_limit.value_or(*m), *m);
  if (wait_limit && !opts_.simulate) {
    auto t = std::make_unique<boost::asio::steady_timer>(io_);
    t->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(*wait_limit * 60)));
    t->async_wait([this, j, s, limit = *wait_limit](boost::system::error_code ec) {
      if (ec) return;  // cancelled (granted, or the engine is gone): touch nothing
      StepRecord& r = run_.jobs[j].steps[s];
      if (r.state != StepState::Waiting || !r.ticket) return;
      broker_.withdraw(r.ticket);
      r.ticket = 0;
      r.state = StepState::TimedOut;
      r.timed_out = true;
      r.error = "waited " + format_minutes(limit) + " for " + std::to_string(plan_.jobs[j].steps[s].devices) +
                " card(s) without getting them (" +
                (plan_.jobs[j].steps[s].queue_timeout_minutes && *plan_.jobs[j].steps[s].queue_timeout_minutes <= limit
                     ? "queue-timeout-minutes" : "timeout-minutes") + ")";
      r.finished = iso_now();
      r.finished_at = now();
      if (!plan_.jobs[j].steps[s].continue_on_error) run_.jobs[j].failed = true;
      if (observer_) observer_->on_step_finished(run_, plan_, static_cast<int>(j), static_cast<int>(s));
      pump();
    });
    timers_->wait_timeouts[{j, s}] = std::move(t);
  }
  // A default estimate is no estimate: such a step must not backfill ahead of a reservation.
  double expected = ps.expected_defaulted ? 0 : ps.expected_minutes * 60 * (opts_.simulate ? opts_.time_scale : 1);
  sr.wait_reason = "queued for " + std::to_string(ps.devices) + (ps.devices == 1 ? " card" : " cards");
  sr.ticket = broker_.request(
      {ps.devices, ps.device_type, label(j, s), expected, sr.order},
      [this, j, s](const std::vector<int>& cards) {
        run_.jobs[j].steps[s].ticket = 0;
        launch(j, s, cards);
      },
      [this, j, s](const std::string& why) {
        StepRecord& r = run_.jobs[j].steps[s];
        r.ticket = 0;
        r.state = StepState::Failed;
        r.error = "no cards can serve this step: " + why;
        r.finished = iso_now();
        r.finished_at = now();
        run_.infrastructure_failure = true;
        run_.infrastructure_problems.push_back(label(j, s) + ": " + r.error);
        if (!plan_.jobs[j].steps[s].continue_on_error) run_.jobs[j].failed = true;
        if (observer_) observer_->on_step_finished(run_, plan_, static_cast<int>(j), static_cast<int>(s));
        pump();
      });
  if (!sr.order) sr.order = sr.ticket;
}

std::vector<std::string> RunEngine::step_env(std::size_t j, std::size_t s, const std::vector<int>& cards) const {
  const PlanJob& pj = plan_.jobs[j];
  const PlanStep& ps = pj.steps[s];
  const JobRecord& jr = run_.jobs[j];
  // runner -> $GITHUB_ENV -> job -> step -> cards -> toolchain. In a parallel job the plain steps run at
  // once, so what one writes to $GITHUB_ENV/PATH reaches only the cleanup steps that run after them all.
  const bool sees_files = !pj.parallel || ps.if_has_status_function;
  std::map<std::string, std::string> env = opts_.base_env;
  if (sees_files)
    for (const auto& [k, v] : jr.file_env) env[k] = v;
  for (const auto& [k, v] : pj.env) env[k] = v;
  for (const auto& [k, v] : ps.env) env[k] = v;
  if (sees_files && !jr.path_prepend.empty()) {
    std::string path;
    for (const auto& p : jr.path_prepend) path += p + ":";
    env["PATH"] = path + env["PATH"];
  }
  // Named, not made: `echo x >> "$GITHUB_OUTPUT"` creates it, and a step that writes none costs no inode
  // (creating four files per step was the largest per-step cost again: bench/README.md, dispatch overhead).
  const std::string files = files_dir(j, s);
  env["GITHUB_ENV"] = files + ".env";
  env["GITHUB_PATH"] = files + ".path";
  env["GITHUB_OUTPUT"] = files + ".output";
  env["GITHUB_STEP_SUMMARY"] = files + ".summary";
  if (!cards.empty()) {
    env["TASK_DEVICE"] = join_ids(cards);
    env["DEVICE_ID"] = std::to_string(cards.front());
  }
  if (pj.toolchain)
    for (const auto& [k, v] : run_.toolchain_env) env[k] = v;
  env["PTO_RUNNER_RUN_ID"] = run_.id;
  env["PTO_RUNNER_JOB"] = pj.id;
  env["PTO_RUNNER_STEP"] = ps.name;
  if (!ps.device_type.empty()) env["PTO_RUNNER_DEVICE_TYPE"] = ps.device_type;  // task-submit's leases: the same type
  if (ps.kind == StepKind::ToolchainSetup) env["PTO_RUNNER_OUTPUT_ENV"] = opts_.run_dir + "/toolchain.env";
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

void RunEngine::launch(std::size_t j, std::size_t s, const std::vector<int>& cards) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  if (jr.cancelled || run_.cancelled) {  // cancelled while waiting for the grant
    if (!cards.empty()) broker_.release(cards);
    sr.state = StepState::Cancelled;
    sr.finished = iso_now();
    pump();
    return;
  }
  sr.state = StepState::Running;
  sr.attempt += 1;
  sr.cards = cards;
  sr.node.clear();
  sr.executor_job.clear();
  sr.wait_reason.clear();
  sr.started = iso_now();
  sr.started_at = now();
  sr.exit_code = -1;
  sr.signal = 0;
  sr.timed_out = false;
  fs::path dir = fs::path(opts_.run_dir) / "logs" / (std::to_string(j + 1) + "-" + slug(plan_.jobs[j].id));
  fs::create_directories(dir);
  sr.log_path = (dir / (std::to_string(s + 1) + "-" + slug(ps.name) + ".log")).string();
  if (sr.attempt > 1) {
    std::ofstream(sr.log_path, std::ios::app) << "\npto-runner: attempt " << sr.attempt << "\n";
  }
  // A retry starts with no file-command files (its outputs replace the failed attempt's).
  if (sr.attempt > 1)
    for (const char* f : {".env", ".path", ".output", ".summary"}) {
      std::error_code ec;
      fs::remove(files_dir(j, s) + f, ec);
    }

  StepLaunch l;
  l.label = label(j, s);
  l.command = ps.run;
  if (ps.kind == StepKind::ToolchainSetup)
    l.command = shell_quote(opts_.self_exe) + " --root " + shell_quote(opts_.root) + " toolchain setup " + opts_.toolchain_args +
                " --output-env \"$PTO_RUNNER_OUTPUT_ENV\"";
  l.shell = ps.shell;
  fs::path wd = ps.working_directory.empty() ? fs::path(opts_.root) : fs::path(opts_.root) / ps.working_directory;
  l.working_directory = wd.lexically_normal().string();
  Executor& exec = ps.kind == StepKind::ToolchainSetup && opts_.lead_executor ? *opts_.lead_executor : executor_;
  if (opts_.simulate && &exec == &executor_) l.working_directory = opts_.root;  // simulated steps never touch the tree
  l.env = step_env(j, s, cards);
  l.log_path = sr.log_path;
  l.marker = run_.id + "/" + std::to_string(j) + "/" + std::to_string(s) + "/" + std::to_string(sr.attempt);
  timers_->wait_timeouts.erase({j, s});
  // Running is bounded by run-timeout-minutes (task-submit --max-time) and by what timeout-minutes left
  // after the wait for cards.
  double waited = sr.queued_at >= 0 ? now() - sr.queued_at : 0;
  if (ps.run_timeout_minutes) l.timeout_seconds = *ps.run_timeout_minutes * 60;
  if (ps.timeout_minutes) {
    double left = std::max(0.001, *ps.timeout_minutes * 60 - waited);
    l.timeout_seconds = l.timeout_seconds > 0 ? std::min(l.timeout_seconds, left) : left;
  }
  l.grace_seconds = opts_.kill_grace_seconds;
  l.log_max_bytes = opts_.log_max_bytes;
  l.simulated_seconds = ps.expected_minutes * 60 * opts_.time_scale;
  l.on_line = [this, j, s](std::string_view line) {
    if (observer_) observer_->on_step_output(run_, plan_, static_cast<int>(j), static_cast<int>(s), line);
  };
  l.devices = ps.devices;
  l.device_type = ps.device_type;
  if (exec.places(l)) {
    // Slurm picks the node and the cards: the step waits in Slurm's queue (with Slurm's reason) and starts
    // when the executor says where. Its clock (timeout-minutes) runs from the submission, as it does here.
    // Its three clocks go to the executor: timeout-minutes (left) from now, queue-timeout-minutes until it
    // is placed, run-timeout-minutes from then.
    l.timeout_seconds = ps.timeout_minutes ? std::max(0.001, *ps.timeout_minutes * 60 - waited) : 0;
    l.wait_timeout_seconds = ps.queue_timeout_minutes ? *ps.queue_timeout_minutes * 60 : 0;
    l.run_timeout_seconds = ps.run_timeout_minutes ? *ps.run_timeout_minutes * 60 : 0;
    sr.state = StepState::Waiting;
    sr.wait_reason = "submitted; waiting for the cluster to place it";
    sr.started.clear();
    sr.started_at = -1;
    l.on_waiting = [this, j, s](const std::string& reason) {
      StepRecord& r = run_.jobs[j].steps[s];
      if (r.state == StepState::Waiting) r.wait_reason = reason;
    };
    l.on_placed = [this, j, s](const Placement& p) {
      StepRecord& r = run_.jobs[j].steps[s];
      if (r.state != StepState::Waiting) return;
      r.state = StepState::Running;
      r.cards = p.cards;
      r.node = p.node;
      r.executor_job = p.job;
      r.wait_reason.clear();
      r.started = iso_now();
      r.started_at = now();
      trace("exec", p.cards);
      if (observer_) observer_->on_step_started(run_, plan_, static_cast<int>(j), static_cast<int>(s));
    };
    sr.handle = exec.start(std::move(l), [this, j, s](const StepOutcome& o) { on_done(j, s, o); });
    return;
  }
  if (observer_) observer_->on_step_started(run_, plan_, static_cast<int>(j), static_cast<int>(s));
  sr.handle = exec.start(std::move(l), [this, j, s](const StepOutcome& o) { on_done(j, s, o); });
  trace("exec", cards);  // the local executor returns once posix_spawn has exec'd the shell
}

void RunEngine::trace(const char* what, const std::vector<int>& cards) {
  if (opts_.trace_file.empty() || cards.empty()) return;
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::ofstream(opts_.trace_file, std::ios::app) << what << " " << ns << " " << join_ids(cards) << "\n";
}

void RunEngine::release_cards(const std::vector<int>& cards, bool infra, const std::string& what) {
  if (cards.empty()) return;
  trace("release", cards);
  broker_.report_outcome(cards, infra, what);
  std::vector<int> now;
  for (int card : cards) {
    // A card that just saw an infrastructure failure is checked before anyone else gets it; it stays locked
    // meanwhile. The check is a supervised process like a step, so the engine (and the daemon) keep going.
    if (infra && !opts_.health.check.empty() && !opts_.simulate && !broker_.is_drained(card))
      start_health_check(card, what);
    else
      now.push_back(card);
  }
  if (!now.empty()) broker_.release(now);
}

void RunEngine::start_health_check(int card, const std::string& after) {
  std::string cmd = opts_.health.check;
  for (std::size_t p; (p = cmd.find("{device}")) != std::string::npos;) cmd.replace(p, 8, std::to_string(card));
  broker_.relabel(card, "health check after " + after);
  StepLaunch l;
  l.label = "health check of card " + std::to_string(card);
  l.command = cmd;
  l.shell = "sh";
  l.working_directory = opts_.root;
  for (const auto& [k, v] : opts_.base_env) l.env.push_back(k + "=" + v);
  l.env.push_back("TASK_DEVICE=" + std::to_string(card));
  l.env.push_back("DEVICE_ID=" + std::to_string(card));
  l.env.push_back("PTO_RUNNER_RUN_ID=" + run_.id);
  l.log_path = opts_.run_dir + "/logs/health-card-" + std::to_string(card) + ".log";
  l.marker = run_.id + "/health/" + std::to_string(card) + "/" + std::to_string(++health_check_count_);
  l.timeout_seconds = opts_.health.check_timeout_seconds;
  l.grace_seconds = opts_.kill_grace_seconds;
  std::string log = l.log_path;
  health_checks_[card] = executor_.start(std::move(l), [this, card, cmd, log](const StepOutcome& o) {
    health_checks_.erase(card);
    if (!o.ok() && !o.cancelled) {
      std::string how = o.timed_out ? "timed out" : o.signal ? "killed by signal " + std::to_string(o.signal)
                                                             : "exit " + std::to_string(o.exit_code);
      broker_.report_outcome({card}, true, "health check `" + cmd + "` failed (" + how + "; " + log + ")");
    }
    broker_.release({card});
    pump();  // the run may be waiting only for this
  });
}

void RunEngine::on_done(std::size_t j, std::size_t s, const StepOutcome& o) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  sr.handle = 0;
  sr.exit_code = o.exit_code;
  sr.signal = o.signal;
  sr.timed_out = o.timed_out;
  sr.error = o.error;
  sr.finished = iso_now();
  sr.finished_at = now();
  sr.intervals.push_back({sr.started_at, sr.finished_at, sr.cards, sr.attempt});
  // Output that could not be kept (a full disk) is the host's failure, whatever the step did.
  if (!o.log_error.empty()) {
    run_.infrastructure_failure = true;
    run_.infrastructure_problems.push_back(label(j, s) + ": " + o.log_error);
  }
  if (!o.survivors.empty()) {
    run_.infrastructure_failure = true;
    run_.infrastructure_problems.push_back(label(j, s) + ": " + o.survivors);
  }
  bool infra = std::count(opts_.health.infra_exit_codes.begin(), opts_.health.infra_exit_codes.end(), o.exit_code) ||
               (o.signal && std::count(opts_.health.infra_signals.begin(), opts_.health.infra_signals.end(), o.signal)) ||
               !o.survivors.empty();
  // Cards the executor placed the step on (Slurm) were never the broker's to give back.
  std::vector<int> cards = sr.executor_job.empty() ? sr.cards : std::vector<int>{};
  const bool cancelled = o.cancelled || (jr.cancelled && !o.timed_out) || run_.cancelled;
  const bool retriable = !o.ok() && !cancelled && !o.timed_out && o.error.empty() && sr.attempt <= ps.retry.max &&
                         (ps.retry.on_exit_codes.empty() ||
                          std::count(ps.retry.on_exit_codes.begin(), ps.retry.on_exit_codes.end(), o.exit_code));
  // The final attempt's $GITHUB_ENV/PATH/OUTPUT count, whatever its result (as in GitHub); a malformed one
  // fails the step.
  std::string file_error;
  if (!retriable && o.error.empty() && !read_file_commands(j, s, file_error)) sr.error = file_error;
  if (o.ok() && sr.error.empty()) {
    sr.state = StepState::Succeeded;
    if (ps.kind == StepKind::ToolchainSetup) {
      std::ifstream in(opts_.run_dir + "/toolchain.env");
      std::string line;
      while (std::getline(in, line)) {
        auto eq = line.find('=');
        if (eq != std::string::npos && eq > 0) run_.toolchain_env[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
  } else if (cancelled) {
    sr.state = StepState::Cancelled;
  } else {
    if (retriable) {
      std::ofstream(sr.log_path, std::ios::app) << "pto-runner: exit " << o.exit_code << "; retrying (attempt "
                                                << sr.attempt + 1 << " of " << ps.retry.max + 1 << ")\n";
      release_cards(cards, infra, label(j, s));
      sr.cards.clear();
      enqueue(j, s);
      pump();
      return;
    }
    sr.state = o.timed_out ? StepState::TimedOut : StepState::Failed;
    if (ps.kind == StepKind::ToolchainSetup) {
      run_.infrastructure_failure = true;
      run_.infrastructure_problems.push_back("toolchain setup failed; see " + sr.log_path);
    }
    if (!ps.continue_on_error) {
      jr.failed = true;
      const PlanJob& pj = plan_.jobs[j];
      if (pj.fail_fast && legs_by_name_[pj.name].size() > 1)
        for (std::size_t leg : legs_by_name_[pj.name])
          if (leg != j && !is_final(run_.jobs[leg].state)) {
            if (run_.jobs[leg].state == JobState::Pending) skip_job(leg, JobState::Cancelled, "fail-fast: " + pj.id + " failed");
            else cancel_job(leg, "fail-fast: " + pj.id + " failed");
          }
    }
  }
  // Report first, then hand the cards on: the next step's start is announced after this step's end.
  if (observer_) observer_->on_step_finished(run_, plan_, static_cast<int>(j), static_cast<int>(s));
  release_cards(cards, infra, label(j, s));
  pump();
}

void RunEngine::cancel_job(std::size_t j, const std::string& reason) {
  JobRecord& jr = run_.jobs[j];
  jr.cancelled = true;
  if (jr.reason.empty()) jr.reason = reason;
  for (std::size_t s = 0; s < jr.steps.size(); ++s) {
    StepRecord& sr = jr.steps[s];
    if (sr.state == StepState::Waiting && sr.ticket) {
      broker_.withdraw(sr.ticket);
      sr.ticket = 0;
      sr.state = StepState::Cancelled;
      sr.finished = iso_now();
    } else if ((sr.state == StepState::Running || sr.state == StepState::Waiting) && sr.handle) {  // Waiting: in Slurm's queue
      bool lead = plan_.jobs[j].steps[s].kind == StepKind::ToolchainSetup && opts_.lead_executor;
      (lead ? *opts_.lead_executor : executor_).cancel(sr.handle);
    } else if (sr.state == StepState::Pending) {
      sr.state = plan_.jobs[j].steps[s].deduplicated_from ? StepState::Deduplicated : StepState::Cancelled;
      sr.finished = iso_now();
    }
  }
}

void RunEngine::finish_job(std::size_t j) {
  JobRecord& jr = run_.jobs[j];
  jr.state = jr.timed_out ? JobState::Failed
             : jr.failed   ? JobState::Failed
             : jr.cancelled ? JobState::Cancelled
                            : JobState::Succeeded;
  jr.finished = iso_now();
  jr.finished_at = now();
  ConditionContext ctx = context(j, std::string::npos);
  for (const auto& [name, expr] : plan_.jobs[j].outputs) jr.outputs[name] = interpolate(expr, ctx);
  timers_->job_timeouts.erase(j);
  if (observer_) observer_->on_job_finished(run_, plan_, static_cast<int>(j));
}

void RunEngine::cancel(int signal) {
  if (finished_ || run_.cancelled) return;
  run_.cancelled = true;
  run_.cancel_signal = signal;
  for (std::size_t j = 0; j < run_.jobs.size(); ++j) {
    if (run_.jobs[j].state == JobState::Pending) skip_job(j, JobState::Cancelled, "the run was cancelled");
    else if (run_.jobs[j].state == JobState::Running) cancel_job(j, "the run was cancelled");
  }
  for (const auto& [card, handle] : health_checks_) executor_.cancel(handle);  // a cancelled check counts as neither
  pump();
}

void RunEngine::abort(const std::string& problem) {
  if (finished_) return;
  run_.infrastructure_failure = true;
  run_.infrastructure_problems.push_back(problem);
  cancel(0);
}

void RunEngine::maybe_finish_run() {
  if (finished_ || !started_) return;
  for (const auto& j : run_.jobs)
    if (!is_final(j.state)) return;
  if (!health_checks_.empty()) return;  // cards still held by a check; it calls pump() when it ends
  // A step is final only after the executor reported its processes gone, so nothing of this run is alive.
  finished_ = true;
  run_.finished = iso_now();
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
