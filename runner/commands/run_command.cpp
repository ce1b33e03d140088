#include <signal.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <filesystem>
#include <iostream>

#include "commands/commands.h"
#include "config/device_spec.h"
#include "engine/engine.h"
#include "host/host.h"
#include "hosting/hosted_run.h"
#include "report/actions_output.h"
#include "report/console.h"
#include "report/simulation_report.h"
#include "sandbox/run_tree.h"
#include "sandbox/sandbox_pool.h"
#include "server/lease_endpoint.h"
#include "store/case_history_queries.h"
#include "util/state_paths.h"

namespace fs = std::filesystem;

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
    const std::string state_dir = cfg.state_dir;

    boost::asio::io_context io;
    HostOptions ho;
    ho.simulate = opts->simulate;
    ho.simulate_lead = opts->simulate_toolchain;
    // Its own tag: several `run`s may share a state directory; none cancels another's Slurm jobs.
    ho.slurm_instance = slurm_instance_tag(state_dir) + "-" + std::to_string(::getpid());
    std::string host_error;
    auto host = wire_host(io, cfg, ho, host_error);
    if (!host) {
      std::cerr << "pto-runner: " << host_error << "\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }

    // Inherited PTO_RUNNER_* (a submit token, another run's ids) never reach steps; the engine sets its own.
    EngineOptions eo = make_engine_options(loaded->project.root, state_dir, cfg, opts->simulate,
                                           opts->time_scale, InheritedEnv::AllButOurs);
    eo.lead_executor = host->lead_executor.get();
    // A split step's tests weighed by the test history a daemon kept in this state dir, when there is one.
    if (std::filesystem::exists(journal_file(state_dir)))
      eo.test_seconds = [history = TestHistoryQueries(journal_file(state_dir))](const std::vector<std::string>& ids) {
        return history.learned_seconds(ids);
      };
    if (const char* trace = std::getenv("PTO_RUNNER_TRACE")) eo.trace_file = trace;
    // Steps whose harness borrows cards itself (task-submit) lease them from this run's queue, as under serve.
    std::unique_ptr<LeaseEndpoint> leases;
    std::optional<LeaseSite> lease_site;
    if (!opts->simulate) {
      leases = std::make_unique<LeaseEndpoint>(io, *host, cfg.kill_grace_seconds);
      if (std::string e = leases->start(); !e.empty()) {
        std::cerr << "pto-runner: cannot serve the run's card leases: " << e << "\n";
        exit_code = to_int(ExitCode::Infrastructure);
        return;
      }
      lease_site.emplace(LeaseSite{leases->access(), leases->book(), leases->url()});
    }

    // As root with sandbox users (runner.yml sandbox:), the run's steps run as one of them, as under serve;
    // run by anyone else, they run as that user (who runs their own code). A simulated run's steps only sleep.
    SandboxConfig sandbox_cfg = cfg.sandbox;
    if (opts->simulate) sandbox_cfg.enabled = false;
    SandboxPool sandbox(sandbox_cfg, cfg.shared_files, cfg.all_card_files(), cfg.lock_dir);
    // Said, as serve says it: runner.yml asks for sandbox users and root's steps run as root instead.
    if (sandbox_cfg.enabled && ::geteuid() == 0 && !sandbox.active())
      std::cerr << "pto-runner: NO SANDBOX: the steps run as root: " << sandbox.why() << "\n";
    if (sandbox.active()) {
      for (const std::string& dir : {state_dir, eo.root})
        if (std::string closed = unsearchable_ancestor(dir); !closed.empty()) {
          std::cerr << "pto-runner: sandbox users cannot reach " << dir << ": " << closed
                    << " is not searchable by others (chmod o+x it, or sandbox: off in runner.yml)\n";
          exit_code = to_int(ExitCode::BadInput);
          return;
        }
      if (std::string problem = close_state_dir(state_dir); !problem.empty()) {
        std::cerr << "pto-runner: " << problem << "\n";
        exit_code = to_int(ExitCode::Infrastructure);
        return;
      }
    }

    ConsoleOptions co;
    co.github = inside_github_actions();
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY")) co.step_summary = summary;
    co.stream_output = !opts->simulate;
    bool sequential = loaded->plan.jobs.size() == 1 && !loaded->plan.jobs[0].parallel;
    co.prefix_lines = !sequential;
    co.live = !co.github && ::isatty(STDOUT_FILENO);
    ConsoleReporter console(co);

    std::cout << "pto-runner: run " << eo.run_id << ": " << loaded->plan.jobs.size() << " jobs on cards "
              << join_ids(cfg.device_ids) << (opts->simulate ? " (simulated)" : "") << "; logs in " << eo.run_dir
              << "\n";
    std::cout.flush();
    RunHosting hosting{io, *host->clock, host->broker(), *host->executor, sandbox, cfg, lease_site ? &*lease_site : nullptr, nullptr};
    HostedRun run(hosting, loaded->plan, eo, nlohmann::json::object(), &console, nullptr);
    RunEngine& engine = run.engine();
    if (leases) {
      leases->set_admit([&run](LeaseRequest& r, const Caller& by) { return run.admit_lease(r, by); });
      leases->desk().set_card_access([&run](const Lease& l, bool granted) { run.lease_card_access(l, granted); });
      leases->desk().set_on_ended([&run](const Lease& l) {
        if (!run.engine().finished()) run.lease_ended(l);
      });
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    std::function<void()> wait_signal = [&] {
      signals.async_wait([&](boost::system::error_code ec, int sig) {
        if (ec) return;
        std::cerr << "\npto-runner: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
                  << ": cancelling every step (SIGTERM, then SIGKILL after " << cfg.kill_grace_seconds << " s)\n";
        run.cancel(sig);
        if (leases) leases->close("the run was cancelled");
        wait_signal();
      });
    };
    wait_signal();
    run.set_on_finished([&](HostedRun&) {
      signals.cancel();
      if (leases) leases->close("its run ended");
      // Its tree back to root and its user back to the pool, then nothing is left to do.
      run.give_back([&] { host->reaper->stop(); });  // the io_context then runs out of work and run() returns
    });
    if (!run.begin()) {
      std::cerr << "pto-runner: every sandbox user is lent (to serve or to other runs)\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    io.run();
    if (opts->simulate)
      std::cout << simulation_report(engine.record(), engine.plan(), cfg.device_ids, eo.time_scale);
    exit_code = to_int(engine.result());
  });
}

}  // namespace pto
