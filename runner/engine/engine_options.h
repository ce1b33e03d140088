#pragma once
// What every run of the engine is given by its host (`run`, `serve`, the tests): its id and directory, the
// runner's environment, the lead job's settings, the health and kill policies; and the small names a run
// uses for its files and messages.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "config/runner_config.h"
#include "caches/cache_tiers.h"
#include "reuse/result_key.h"
#include "perf/perf_record.h"
#include "exec/run_as.h"
#include "exec/step_limits.h"

namespace pto {

class Executor;
class SecretMask;

struct EngineOptions {
  std::string run_id;
  std::string root = ".";
  std::string run_dir;  // <state-dir>/runs/<id>: logs/ and outputs live here
  bool simulate = false;
  double time_scale = 1;
  double kill_grace_seconds = 10;
  std::uint64_t log_max_bytes = 0;  // per step log (runner.yml log-max-mb)
  std::map<std::string, std::string> base_env;  // the runner's environment and the host's env/env-file, first in the merge
  /// First on every step's PATH: a directory holding only pto-runner's `task-submit`, so a harness's
  /// `task-submit` is the queue's even where the incumbent is installed ("" when none could be made).
  std::string path_first;
  std::string self_exe;                         // for the lead job's `pto-runner toolchain setup`
  std::string toolchain_args;                   // its host settings (--cache-dir, --mirror); --root is `root`
  HealthConfig health;
  /// A step's test reports in all (runner.yml tests.max-report-bytes).
  std::size_t max_report_bytes = 256u << 20;
  std::size_t max_report_cases = 10000;  // runner.yml tests.max-cases
  /// Where blocking reads of a step's files (its test reports) run: `work` elsewhere, then `then` back on the
  /// engine's thread. A daemon's worker pool, so a step's reports never stall the engine or a GET. Unset: both
  /// at once, here (`run` in the foreground, the engine's unit tests).
  std::function<void(std::function<void()> work, std::function<void()> then)> offload;
  /// The mute in force for a test id (testcases/mutes), asked when its failure is judged: the host's
  /// (runner.yml's and the API's). Unset: nothing is muted.
  std::function<std::optional<TestMute>(const std::string& id)> muted;
  /// Learned durations in seconds of test ids (store/case_history_queries), asked once per split step when its
  /// tests are collected. Unset, or a test absent: unknown (the split counts it at the median).
  std::function<std::map<std::string, double>(const std::vector<std::string>& ids)> test_seconds;
  /// The run's sandbox user (a daemon's, sandbox/sandbox_pool): every step runs as it, within `limits`, able to
  /// open its own cards' files only (`card_files`, {id} their id). The lead job runs as the daemon, its smoke
  /// check as this user. Unset: steps run as whoever runs pto-runner.
  std::optional<RunAs> run_as;
  /// The run's named caches and the tier it writes (caches/cache_tiers): each step with `caches:` gets their
  /// variables. Unset: a step's caches get nothing (its variables stay unset).
  std::shared_ptr<const RunCaches> caches;
  /// Reusing green results of the same inputs (reuse/): `find` the result a step's key may stand in with,
  /// `record` a step that ended green and may stand in later. Unset (a run without a commit, `--no-reuse`):
  /// every step runs. The inputs' trees come with set_input_trees().
  struct Reuse {
    std::function<std::optional<ReusableResult>(const std::string& key)> find;
    std::function<void(const ReusableResult& made)> record;
  };
  std::optional<Reuse> reuse;
  /// Perf steps' history (store/perf_history, perf/): `series` the earlier records of a metric on this run's
  /// ref and a card type (oldest first), `record` a step's samples and verdict. Unset: a perf step still takes
  /// its samples and shows them, judged against nothing.
  struct Perf {
    std::function<std::vector<PerfRecord>(const std::string& metric, const std::string& card_type)> series;
    std::function<void(const PerfRecord& made)> record;
    std::string ref, commit;
    /// `compare: base` (bisect/base_comparisons): after each sample of a perf step that compares with another
    /// build, the engine waits (its cards given back) and calls this; the comparer answers with perf_next() or
    /// perf_settle(). Unset: `compare: base` is judged against history.
    std::function<void(const std::string& run, std::size_t job, std::size_t step)> paired;
    /// The cards every perf step of this run measures on (the merge base's side of a comparison: the pull
    /// request's card). Empty: the cards of its first sample.
    std::vector<int> cards;
  };
  std::optional<Perf> perf;
  StepLimits::Spec limits;
  std::vector<std::string> card_files;
  /// When set, each attempt of a step gets a lease token of its own ($PTO_RUNNER_LEASE_TOKEN), from the host
  /// that serves its leases: `seconds_left` is what its timeouts leave it (0: none), which bounds its leases;
  /// the host ends them when the attempt stops running.
  std::function<std::string(std::size_t job, std::size_t step, double seconds_left)> step_lease_token;
  /// The run's secrets (their values masked in every log, summary and output; steps add with ::add-mask::).
  /// Null: the engine makes an empty one (a step may still add masks).
  std::shared_ptr<SecretMask> mask;
  /// Runs the lead job's step when set (under --simulate the toolchain is still set up for real).
  Executor* lead_executor = nullptr;
  /// When set ($PTO_RUNNER_TRACE), "release <ns> <cards>" and "exec <ns> <cards>" lines are appended here, for
  /// the hand-over latency benchmark (bench/release_latency.sh).
  std::string trace_file;
};

/// Which of the process's own environment reaches steps: all of it but PTO_RUNNER_* (`run`, a maintainer's
/// own command in their own shell), or only the allow-list (`serve`: the daemon's environment is not the
/// steps'; as GitHub's runner and slurmd, which pass a fixed set).
enum class InheritedEnv { AllButOurs, AllowList };

/// The names of the allow-list: PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, LC_*, TZ, TERM, SLURM_CONF,
/// SLURM_CLUSTERS and the proxy variables (both cases).
bool allowed_inherited_name(const std::string& name);

/// The options every run gets, from the host settings: a new run id and its directory under `state_dir`, the
/// root made absolute, the process's environment as `inherit` says, then the host's env and env-file, this
/// binary and the host settings for the lead job's `toolchain setup`, health policy and kill grace.
EngineOptions make_engine_options(const std::string& root, const std::string& state_dir, const RunnerConfig& cfg, bool simulate, double time_scale,
                                  InheritedEnv inherit);

/// <state-dir>/tools with a `task-submit` link to the `pto-task-submit` beside this binary (made once, kept);
/// "" when there is no such binary or the directory cannot be made.
std::string ensure_tools_dir(const std::string& state_dir);

/// "30 min", or seconds for fractions ("3 s"): for messages about timeouts.
std::string format_minutes(double minutes);
/// A file-name-safe form of a job or step name.
std::string slug(const std::string& s);

}  // namespace pto
