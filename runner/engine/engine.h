#pragma once
// RunEngine: one run's state machine, with GitHub Actions semantics for needs, if:, continue-on-error,
// fail-fast and timeouts, plus pto-runner's lead job, parallel steps and card requests.
//
// Every transition happens on the io_context thread: process exits, card grants, timers and cancels all
// arrive as callbacks there and end in pump(), which moves every job and step as far as it can go.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "config/runner_config.h"
#include "engine/card_broker.h"
#include "engine/run_state.h"
#include "exec/executor.h"
#include "plan/condition.h"
#include "plan/plan.h"
#include "util/exit_code.h"

namespace boost::asio {
class io_context;
}

namespace pto {

/// What views (console, GitHub, journal, HTTP) hear about. Called on the engine thread.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void on_step_started(const RunRecord&, const Plan&, int /*job*/, int /*step*/) {}
  virtual void on_step_output(const RunRecord&, const Plan&, int /*job*/, int /*step*/, std::string_view /*line*/) {}
  virtual void on_step_finished(const RunRecord&, const Plan&, int /*job*/, int /*step*/) {}
  virtual void on_job_finished(const RunRecord&, const Plan&, int /*job*/) {}
  virtual void on_run_finished(const RunRecord&, const Plan&) {}
};

struct EngineOptions {
  std::string run_id;
  std::string root = ".";
  std::string run_dir;  // <state-dir>/runs/<id>: logs/ and outputs live here
  bool simulate = false;
  double time_scale = 1;
  double kill_grace_seconds = 10;
  std::uint64_t log_max_bytes = 0;  // per step log (runner.yml log-max-mb)
  std::map<std::string, std::string> base_env;  // the runner's environment, first in the merge
  std::string self_exe;                         // for the lead job's `pto-runner toolchain setup`
  std::string toolchain_args;                   // its host settings (--cache-dir, --mirror); --root is `root`
  HealthConfig health;
  /// Runs the lead job's step when set (under --simulate the toolchain is still set up for real).
  Executor* lead_executor = nullptr;
  /// When set ($PTO_RUNNER_TRACE), "release <ns> <cards>" and "exec <ns> <cards>" lines are appended here, for
  /// the hand-over latency benchmark (bench/release_latency.sh).
  std::string trace_file;
};

class RunEngine {
 public:
  RunEngine(boost::asio::io_context& io, Plan plan, CardBroker& broker, Executor& executor, EngineOptions opts,
            RunObserver* observer);
  ~RunEngine();

  void start();
  /// Cancels everything: nothing new starts, running steps get SIGTERM then SIGKILL. `signal` (SIGINT or
  /// SIGTERM, 0 for an API cancel) decides the exit code.
  void cancel(int signal);
  /// Ends the run because the host failed it (its journal cannot be written): everything is cancelled as by
  /// cancel(0), and the run ends `failed` with exit 3 and `problem` among its infrastructure problems.
  void abort(const std::string& problem);
  bool finished() const { return finished_; }
  ExitCode result() const;
  const RunRecord& record() const { return run_; }
  const Plan& plan() const { return plan_; }
  /// Seconds since start on the engine clock.
  double now() const;
  void set_on_finished(std::function<void()> f) { on_finished_ = std::move(f); }

 private:
  void pump();
  bool needs_done(std::size_t job) const;
  bool needs_succeeded(std::size_t job) const;
  void start_job(std::size_t job);
  void skip_job(std::size_t job, JobState state, const std::string& reason);
  void advance(std::size_t job);
  bool try_start_step(std::size_t job, std::size_t step);
  void enqueue(std::size_t job, std::size_t step);
  void launch(std::size_t job, std::size_t step, const std::vector<int>& cards);
  void on_done(std::size_t job, std::size_t step, const StepOutcome& o);
  void finish_job(std::size_t job);
  void cancel_job(std::size_t job, const std::string& reason);
  void release_cards(const std::vector<int>& cards, bool infra, const std::string& label);
  void start_health_check(int card, const std::string& after);
  std::string label(std::size_t job, std::size_t step) const;
  std::vector<std::string> step_env(std::size_t job, std::size_t step, const std::vector<int>& cards) const;
  /// What expressions of job `job` read: matrix, env, finished steps with an id, and its needs. `step` is the
  /// step being decided (its own env joins the env context) or npos.
  ConditionContext context(std::size_t job, std::size_t step) const;
  void resolve_step(std::size_t job, std::size_t step);
  /// Where a step's $GITHUB_ENV/PATH/OUTPUT/STEP_SUMMARY files go: this prefix + .env, .path, .output, .summary.
  std::string files_dir(std::size_t job, std::size_t step) const;
  /// Reads the step's $GITHUB_ENV/PATH/OUTPUT; false (with `error`) when one is malformed.
  bool read_file_commands(std::size_t job, std::size_t step, std::string& error);
  void maybe_finish_run();

  boost::asio::io_context& io_;
  Plan plan_;
  CardBroker& broker_;
  Executor& executor_;
  EngineOptions opts_;
  RunObserver* observer_;
  RunRecord run_;
  std::map<std::string, std::vector<std::size_t>> legs_by_name_;
  struct Timers;
  std::unique_ptr<Timers> timers_;
  bool started_ = false, finished_ = false, in_pump_ = false, pump_again_ = false;
  std::function<void()> on_finished_;
  std::map<int, std::uint64_t> health_checks_;  // card -> executor handle of its running health check
  std::uint64_t health_check_count_ = 0;
  double t0_ = 0;
  void trace(const char* what, const std::vector<int>& cards);
};

/// The options every run gets, from the host settings: a new run id and its directory under `state_dir`, the
/// root made absolute, the runner's environment (names starting with `drop_env_prefix` left out), this binary
/// and the host settings for the lead job's `toolchain setup`, health policy and kill grace.
EngineOptions make_engine_options(const std::string& root, const std::string& state_dir, const RunnerConfig& cfg, bool simulate, double time_scale,
                                  const std::string& drop_env_prefix = "");

/// A new run id: YYYYMMDD-HHMMSS-xxxx (UTC), x a hex digit.
std::string make_run_id();
/// "30 min", or seconds for fractions ("3 s"): for messages about timeouts.
std::string format_minutes(double minutes);
/// A file-name-safe form of a job or step name.
std::string slug(const std::string& s);

}  // namespace pto
