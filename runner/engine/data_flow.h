#pragma once
// DataFlow: everything that flows between the steps and jobs of one run, with GitHub Actions' semantics, in
// one place. A step hands values back through four files ($GITHUB_ENV, $GITHUB_PATH, $GITHUB_OUTPUT,
// $GITHUB_STEP_SUMMARY, named per step under the run directory); after its final attempt they are read into
// the records (take_step_files), and from there:
//   * `steps.ID.outputs.NAME`, `steps.ID.outcome|conclusion` and `env.NAME` reach later steps' `if:` and
//     `${{ }}` (context, resolve_step), replaced once when a step first becomes runnable;
//   * $GITHUB_ENV values and $GITHUB_PATH entries reach later steps' environment (step_env);
//   * job `outputs:` are evaluated when the job ends (finish_job) and reach dependants as
//     `needs.JOB.outputs.NAME` (context, resolve_job for the dependant's own `env`).
// It reads and writes only the run's records and the plan's not-yet-resolved text; the engine decides when.
#include <unistd.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/run_state.h"
#include "plan/condition.h"
#include "plan/plan.h"

namespace pto {

class SecretMask;

/// The legs of each job by job name (a matrix job has several; `needs` name jobs, not legs).
using LegsByName = std::map<std::string, std::vector<std::size_t>>;

class DataFlow {
 public:
  static constexpr std::size_t kNoStep = static_cast<std::size_t>(-1);
  DataFlow(Plan& plan, RunRecord& run, const LegsByName& legs, std::string run_dir)
      : plan_(plan), run_(run), legs_(legs), run_dir_(std::move(run_dir)) {}

  /// The run's secrets: outputs and summaries a step hands back are stored masked.
  void set_mask(std::shared_ptr<SecretMask> mask) { mask_ = std::move(mask); }
  /// Who the step's files must belong to (the run's sandbox user; by default whoever runs the engine).
  void set_files_owner(uid_t uid) { files_owner_ = uid; }
  /// What expressions of job `job` read: matrix, env ($GITHUB_ENV, job, then step `step`'s own), the
  /// finished steps with an id, and its needs' results and outputs.
  ConditionContext context(std::size_t job, std::size_t step = kNoStep) const;
  /// The job starts: `needs.*.outputs` in its env are known now.
  void resolve_job(std::size_t job);
  /// The step becomes runnable for the first time: its run, name, env and working-directory `${{ }}` are
  /// replaced (everything they may read has happened: plan checks forbid reading later steps).
  void resolve_step(std::size_t job, std::size_t step);
  /// Where the step's four files go: this prefix + .env, .path, .output, .summary.
  std::string files_prefix(std::size_t job, std::size_t step) const;
  /// Removes an earlier attempt's files (a retry's outputs replace the failed attempt's).
  void forget_step_files(std::size_t job, std::size_t step) const;
  /// After the step's final attempt, whatever its result (as in GitHub): its outputs into its record, its env
  /// and path into its job's, and the files removed. False, with `error`, when one of them is malformed (the
  /// step then fails).
  bool take_step_files(std::size_t job, std::size_t step, std::string& error);
  /// The job ended: its `outputs:` are evaluated for its dependants.
  void finish_job(std::size_t job);
  /// The step's environment, in GitHub's order: `base` (the runner's), $GITHUB_ENV, job env, step env,
  /// $GITHUB_PATH before PATH, `path_first` before all of it, the four file paths, the cards, the lead job's
  /// PTOAS_*, pto-runner's own.
  std::vector<std::string> step_env(std::size_t job, std::size_t step, const std::map<std::string, std::string>& base,
                                    const std::vector<int>& cards, const std::string& path_first = "") const;

 private:
  Plan& plan_;
  RunRecord& run_;
  const LegsByName& legs_;
  std::string run_dir_;
  std::shared_ptr<SecretMask> mask_;
  uid_t files_owner_ = ::geteuid();
};

}  // namespace pto
