#include <signal.h>
#include <unistd.h>

#include <iostream>

#include "commands/commands.h"
#include "config/device_spec.h"
#include "engine/engine.h"
#include "hosting/foreground_run.h"
#include "report/actions_output.h"
#include "report/console.h"
#include "report/simulation_report.h"
#include "util/state_paths.h"

namespace pto {

void register_run_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::vector<std::string> jobs;
    bool simulate = false;
    bool simulate_toolchain = false;
    double time_scale = 0.01;
    std::string lock_dir, state_dir;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Execute the plan here, in the foreground, until done");
  cmd->add_option("--job", opts->jobs, "Only these jobs (and the jobs they need)");
  add_device_options(*cmd, common);
  cmd->add_flag("--simulate", opts->simulate,
                "Replace each step by a sleep of its expected duration; print per-card timelines and a summary");
  cmd->add_flag("--simulate-toolchain", opts->simulate_toolchain,
                "With --simulate: sleep instead of setting up PTOAS too (by default the lead job runs for real)");
  cmd->add_option("--time-scale", opts->time_scale,
                  "With --simulate: real seconds per simulated second (default 0.01: a 20-minute step sleeps 12 s)")
      ->check(CLI::Range(1e-6, 1e6));
  cmd->add_option("--lock-dir", opts->lock_dir, "Card lock directory (overrides runner.yml devices.lock-dir)");
  cmd->add_option("--state-dir", opts->state_dir, "Logs and run state (overrides runner.yml state-dir)");
  add_footer(*cmd, "0 every job succeeded; 1 a step or job failed; 2 bad input files; 3 infrastructure (toolchain, card "
                   "pool); 130/143 interrupted by SIGINT/SIGTERM after every step was stopped.");
  cmd->callback([opts, &common, &exit_code] {
    auto loaded = load_plan_or_report(common, opts->jobs);
    if (!loaded) {
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    apply_history(*loaded, opts->state_dir);
    RunnerConfig cfg = loaded->project.runner;
    resolve_host_dirs(cfg, loaded->project.root, opts->lock_dir, opts->state_dir);

    // Before the run it observes, so it outlives it.
    ConsoleOptions co;
    co.github = inside_github_actions();
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY")) co.step_summary = summary;
    co.stream_output = !opts->simulate;
    bool sequential = loaded->plan.jobs.size() == 1 && !loaded->plan.jobs[0].parallel;
    co.prefix_lines = !sequential;
    co.live = !co.github && ::isatty(STDOUT_FILENO);
    ConsoleReporter console(co);
    ForegroundOptions fo{opts->simulate, opts->simulate_toolchain, opts->time_scale, ""};
    if (const char* trace = std::getenv("PTO_RUNNER_TRACE")) fo.trace_file = trace;
    ForegroundRun run(cfg, loaded->project.root, fo);
    ExitCode refused = ExitCode::Infrastructure;
    if (std::string e = run.open(refused); !e.empty()) {
      std::cerr << "pto-runner: " << e << "\n";
      exit_code = to_int(refused);
      return;
    }
    for (const auto& w : run.warnings()) std::cerr << "pto-runner: " << w << "\n";
    const EngineOptions& eo = run.options();
    std::cout << "pto-runner: run " << eo.run_id << ": " << loaded->plan.jobs.size() << " jobs on cards "
              << join_ids(cfg.device_ids) << (opts->simulate ? " (simulated)" : "") << "; logs in " << eo.run_dir
              << "\n";
    std::cout.flush();
    run.set_on_signal([&cfg](int sig) {
      std::cerr << "\npto-runner: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
                << ": cancelling every step (SIGTERM, then SIGKILL after " << cfg.kill_grace_seconds << " s)\n";
    });
    if (!run.run(loaded->plan, console)) {
      std::cerr << "pto-runner: every sandbox user is lent (to serve or to other runs)\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    const RunEngine& engine = run.engine();
    if (opts->simulate)
      std::cout << simulation_report(engine.record(), engine.plan(), cfg.device_ids, eo.time_scale);
    exit_code = to_int(engine.result());
  });
}

}  // namespace pto
