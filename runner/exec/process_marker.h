#pragma once
// ProcessMarker: what every process pto-runner starts carries in PTO_RUNNER_STEP_MARK (exec/process_sweep),
// so that its escapees are found and killed, a crashed daemon's leftovers are found by run at recovery, and
// a Slurm job is named after what it runs. Built here and parsed here, nowhere else:
//   step          RUN/JOB/STEP/ATTEMPT   (job and step 0-based indices in the run's plan, attempt 1-based)
//   health check  RUN/health/CARD/N
//   lease         [RUN/]lease/ID         (an operator's lease has no run)
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pto {

struct ProcessMarker {
  enum class Kind { Step, HealthCheck, Lease };
  Kind kind = Kind::Step;
  std::string run;                      // "" only for an operator's lease
  std::size_t job = 0, step = 0;        // Step
  int attempt = 0;                      // Step
  int card = 0, check = 0;              // HealthCheck
  std::string lease;                    // Lease: its id

  static ProcessMarker for_step(std::string run, std::size_t job, std::size_t step, int attempt);
  static ProcessMarker for_health_check(std::string run, int card, int check);
  static ProcessMarker for_lease(std::string run, std::string lease_id);
  /// "" for text of none of the three forms.
  static std::optional<ProcessMarker> parse(std::string_view text);
  std::string text() const;
  /// What every marker of run `run` starts with (recovery kills a run's processes by it).
  static std::string run_prefix(const std::string& run) { return run + "/"; }
};

}  // namespace pto
