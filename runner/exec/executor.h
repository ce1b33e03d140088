#pragma once
// Executor: the only place that starts, signals and reaps step processes. The engine sees this face only;
// the local executor runs `bash -e -o pipefail -c RUN`, the simulated one sleeps for the step's expected
// duration, and a Slurm executor could sit beside them.
//
// Every callback runs on the io_context thread that owns the engine, so the engine needs no locks.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/run_as.h"
#include "exec/step_limits.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class SecretMask;

/// Where an executor that picks the cards itself (Slurm) ran a step: the node, the cards, its own job id.
struct Placement {
  std::string node;
  std::vector<int> cards;
  std::string job;
};

struct StepLaunch {
  std::string label;  // "job / step", for messages
  std::string command;
  std::string shell = "bash";  // bash (with -e -o pipefail) or sh (-e)
  std::string working_directory;
  std::vector<std::string> env;  // KEY=VALUE, complete (nothing else is inherited)
  std::string log_path;
  /// Unique per attempt; exported as PTO_RUNNER_STEP_MARK so escaped descendants can be found and killed.
  std::string marker;
  double timeout_seconds = 0;  // 0: none
  double grace_seconds = 10;   // SIGTERM -> SIGKILL
  double simulated_seconds = 0;
  /// The log keeps at most this many bytes (0: no cap): the head, then the last kLogTailBytes, and a line
  /// saying how much was dropped between them. One step cannot fill the disk.
  std::uint64_t log_max_bytes = 0;
  /// Called with each complete output line (stdout and stderr merged), for the console.
  std::function<void(std::string_view)> on_line;
  /// The run's sandbox user: the step runs as it (exec/spawn_process), never as the daemon. Unset: as the daemon.
  std::optional<RunAs> run_as;
  /// Files the step's user may open while it runs (its cards' device files: exec/card_access); granted
  /// before it starts, taken away once every process of it is gone.
  std::vector<std::string> card_files;
  /// pids-max and memory-max of its cgroup (exec/step_limits).
  StepLimits::Spec limits;
  /// The run's secrets: output is masked line by line before it reaches the log or on_line, and a line
  /// `::add-mask::VALUE` adds VALUE (util/secret_mask). Null: output as it comes.
  std::shared_ptr<SecretMask> mask;
  /// The cards the step asks for, for an executor that places steps itself (`places`); the engine's broker
  /// then granted none.
  int devices = 0;
  std::string device_type;
  /// For such an executor, `timeout_seconds` counts from the start (timeout-minutes); these two count
  /// until it is placed (queue-timeout-minutes) and from then on (run-timeout-minutes). 0: none.
  double wait_timeout_seconds = 0;
  double run_timeout_seconds = 0;
  /// Such an executor reports why the step still waits, and where it started once it does.
  std::function<void(const std::string& reason)> on_waiting;
  std::function<void(const Placement&)> on_placed;
  /// Descriptors whoever holds the step keeps open while it runs: its cards' flocks (host/dispatcher). A step's
  /// supervisor keeps them past the daemon, so its cards stay its own (supervise/); the local executor, in the
  /// daemon's own process, needs nothing of them.
  std::vector<int> hold_fds;
  /// Until it returns true, each output line is offered here first, and a line it takes is not logged (the
  /// Slurm executor's placement line). Lines it declines are logged as usual.
  std::function<bool(std::string_view)> take_line;
  /// For an executor in another process (the step supervisor), which cannot call take_line back: lines that
  /// start with this are taken (not logged) and handed to take_line there. "": none.
  std::string take_prefix;
};

struct StepOutcome {
  int exit_code = -1;  // -1 when the process was killed by a signal or never started
  int signal = 0;
  bool timed_out = false;
  bool cancelled = false;
  std::string error;  // the process could not be started
  std::string log_error;  // its log could not be written (disk full, I/O error): the output is lost from there
  std::string survivors;  // processes of the step outlived SIGKILL (uninterruptible sleep): the host's problem
  std::string limit_reached;  // it ran into pids-max or memory-max (exec/step_limits): it fails, with this reason
  int pid = 0;
  bool ok() const { return exit_code == 0 && signal == 0 && !timed_out && !cancelled && error.empty() && limit_reached.empty(); }
  /// How a check (health check, preflight, probe) ended, for its message: "" when it passed.
  std::string failure() const {
    if (ok()) return "";
    if (cancelled) return "cancelled";
    if (timed_out) return "timed out";
    if (signal) return "killed by signal " + std::to_string(signal);
    if (!error.empty()) return error;
    return "exit " + std::to_string(exit_code);
  }
};

/// A host's per-card command (`health.check "npu-smi info -i {device}"`) with `{device}` replaced by `card`.
inline std::string for_card(std::string command, int card) {
  for (std::size_t p; (p = command.find("{device}")) != std::string::npos;) command.replace(p, 8, std::to_string(card));
  return command;
}

constexpr std::uint64_t kLogTailBytes = 1 << 20;

class Executor {
 public:
  virtual ~Executor() = default;
  /// Starts a step; `done` is called once, after every process of the step is gone.
  virtual std::uint64_t start(StepLaunch launch, std::function<void(const StepOutcome&)> done) = 0;
  /// Asks a running step to stop (SIGTERM, SIGKILL after the grace period, sweep). `done` still fires.
  virtual void cancel(std::uint64_t handle) = 0;
  virtual std::size_t active() const = 0;
  /// True when this executor, not the card broker, picks the step's cards (Slurm): the step waits until
  /// `on_placed`.
  virtual bool places(const StepLaunch&) const { return false; }
};

/// How the local executor starts processes: through its spawner process (exec/spawner; started with the
/// first step, in-process when there is none), or in-process (one-off commands: exec/run_sync).
enum class Spawning { Spawner, InProcess };
std::unique_ptr<Executor> make_local_executor(boost::asio::io_context& io, Spawning spawning = Spawning::Spawner);
/// Each step sleeps `simulated_seconds` (already scaled by --time-scale) and succeeds.
std::unique_ptr<Executor> make_simulated_executor(boost::asio::io_context& io);

}  // namespace pto
