#pragma once
// ForegroundRun: the one run `pto-runner run` hosts in the foreground, wired as the daemon hosts each of its
// runs (hosting/run_host): the host (host/host, with a Slurm tag of its own: several `run`s may share a state
// directory), a sandbox user of its own where root has sandbox users (the state dir closed to them as serve
// closes it), its own lease endpoint for steps whose harness takes cards itself (task-submit:
// server/lease_endpoint, each lease admitted by the run as the daemon admits it), SIGINT and SIGTERM cancel
// every step, and at its end its leases, tree and user go back. What is printed is the command's
// (commands/run_command).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "config/runner_config.h"
#include "engine/engine.h"
#include "hosting/hosted_run.h"
#include "util/exit_code.h"

namespace pto {

class LeaseEndpoint;
class SandboxPool;
struct Host;

struct ForegroundOptions {
  bool simulate = false;       // steps sleep their expected duration
  bool simulate_lead = false;  // the lead job too
  double time_scale = 0.01;
  std::string trace_file;  // the engine's trace (PTO_RUNNER_TRACE)
};

class ForegroundRun {
 public:
  /// `cfg`: the host settings with their directories resolved; `root`: where the definitions are.
  ForegroundRun(RunnerConfig cfg, std::string root, ForegroundOptions opts);
  ~ForegroundRun();
  ForegroundRun(const ForegroundRun&) = delete;
  ForegroundRun& operator=(const ForegroundRun&) = delete;

  /// Wires the host, the run's leases and its sandbox. "" or why it cannot run; `code` then says how bad.
  std::string open(ExitCode& code);
  /// What should be said before it runs (runner.yml asks for sandbox users and the steps run as root).
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// Its id, folder and scale (set by open()).
  const EngineOptions& options() const { return eo_; }
  /// Told when SIGINT or SIGTERM cancels it (the signal).
  void set_on_signal(std::function<void(int signal)> f) { on_signal_ = std::move(f); }
  /// Runs `plan` to its end, telling `observer` (the console). False: every sandbox user is lent, nothing ran.
  bool run(const Plan& plan, RunObserver& observer);
  /// Once run: its engine (its record, plan and result).
  const RunEngine& engine() const;

 private:
  RunnerConfig cfg_;
  std::string root_;
  ForegroundOptions opts_;
  boost::asio::io_context io_;
  std::unique_ptr<Host> host_;
  EngineOptions eo_;
  std::unique_ptr<LeaseEndpoint> leases_;  // null: a simulated run's steps take no cards themselves
  std::optional<LeaseSite> site_;          // where the run reaches leases_: outlives the run (its tokens go there)
  std::unique_ptr<SandboxPool> sandbox_;
  std::unique_ptr<HostedRun> run_;
  std::vector<std::string> warnings_;
  std::function<void(int)> on_signal_;
};

}  // namespace pto
