#pragma once
// jobs/NAME.yml: one job per file, in GitHub Actions vocabulary plus pto-runner's keys
// (step `devices`, `retry`, `models`, `expected-minutes`; job `parallel`, `toolchain`).
//
// The loader only checks each file on its own; cross-file checks (needs, cycles, models, pool size) happen
// in config/project.cpp and plan/plan.cpp, which see every file.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "config/perf_spec.h"
#include "config/failure_cause.h"
#include "config/yaml_map.h"

namespace pto {

/// `retry: {max, on, elsewhere, on-exit-codes}`. Without `retry`, a failure charged to a card or the host runs
/// once more on other cards (max 1, on [card, infra], elsewhere). With `max` and no `on`, any failure is retried
/// (as before causes existed; a pass after a failure of the code is then `flaky`).
struct RetryPolicy {
  int max = 0;                      // extra attempts after the first
  std::vector<int> on_exit_codes;   // empty: retry on any non-zero exit
  std::set<FailureCause> on = {FailureCause::Card, FailureCause::Infra};
  bool elsewhere = true;            // a retry never gets the cards the failed attempt was charged to
  bool given = false;               // the definition has `retry:`
  /// `tests: failed` (the default on a step with `tests:`): a failed attempt whose reports name failed tests
  /// reruns only those (and the victims of a card), at most `max-tests` of them; `tests: all` retries the
  /// whole step as a step without `tests:` is.
  bool failed_tests_only = true;
  int max_tests = 100;
  /// `control: true`: when the step fails in a pull request's run, it (only its failed tests, with `tests:`)
  /// also runs on the merge base, and its verdict says whether main fails too (bisect/control_runs).
  bool control = false;
  /// Whether the failed tests of `attempt` (1-based) get another attempt.
  bool reruns_tests(int attempt) const { return failed_tests_only && attempt <= (given ? max : 1); }
  /// Whether a failure of `cause` gets another attempt after `attempt` (1-based) failed.
  bool retries(FailureCause cause, int attempt) const {
    if (cause == FailureCause::Timeout || !on.count(cause == FailureCause::Code ? FailureCause::Flaky : cause)) return false;
    return attempt <= (given ? max : 1);
  }
};

/// `tests:` on a step (SPEC "Test results"): where its test cases come from. `pytest`: every pytest process
/// the step starts reports through pto-runner's plugin; `{junit: GLOB}`: JUnit XML files the step writes
/// (ctest --output-junit, gtest, Catch2), GLOB relative to its working directory; the long form
/// `{format, path, allow-empty, rerun}`.
struct TestsSpec {
  enum class Format { None, Pytest, Junit };
  Format format = Format::None;
  std::string path;          // junit: the glob
  bool allow_empty = false;  // a step that ran no test is green
  std::string rerun;         // junit: 'CMD {tests}', how to run only some tests ({tests}: their ids, quoted)
  SourceLoc loc;
  bool any() const { return format != Format::None; }
};

/// Reads `tests:`; kept apart for its own tests.
TestsSpec read_tests_spec(const YAML::Node& node, const std::string& file, Diagnostics& diags);

/// `caches: {NAME: ENV_VAR}` on a job or a step: each named cache's directory handed to the step in ENV_VAR,
/// in the tier the run's ref may write (caches/cache_tiers). In file order, with where each is written.
struct CacheUse {
  std::string name, var;
  SourceLoc loc;
};
/// Reads a `caches:` mapping (names: a-z, 0-9, . _ -; variables: A-Z, 0-9, _).
std::vector<CacheUse> read_caches(const YAML::Node& node, const std::string& file, Diagnostics& diags);

/// `reuse:` on a job or a step: `false` (always run), or `{inputs: [GLOB, ...]}` (the files its result depends
/// on; by default the whole commit). A green result of the same inputs is reused rather than run again (reuse/).
struct ReuseSpec {
  bool enabled = true;
  std::vector<std::string> inputs;
  SourceLoc loc;
};
std::optional<ReuseSpec> read_reuse(const YAML::Node& node, const std::string& file, Diagnostics& diags);

struct StepDef {
  std::string id;    // GitHub's step id, for steps.ID.* in later steps
  SourceLoc id_loc;
  std::string name;  // may be empty; may hold ${{ matrix.x }}; for `models` steps a template with {model}/{example}
  std::string run;
  std::vector<std::string> models;
  std::vector<SourceLoc> model_locs;
  std::map<std::string, std::string> env;
  std::vector<CacheUse> caches;  // beside the job's (a step's own wins for a name both give)
  std::optional<ReuseSpec> reuse;  // in place of the job's
  std::optional<PerfSpec> perf;
  std::string if_expr;
  std::optional<double> timeout_minutes;
  std::optional<double> queue_timeout_minutes, run_timeout_minutes;
  std::optional<double> expected_minutes;
  std::string device_type;  // "" = any card
  SourceLoc device_type_loc;
  bool continue_on_error = false;
  std::string working_directory;
  std::string shell;
  std::string devices;  // an integer literal, a ${{ matrix.x }} expression, or empty (0 / the example's)
  /// `cpus:` and `memory:` (bytes): what the step uses of the host beside its cards (unset: the example's, else
  /// nothing reserved and no cpu.max/memory.max).
  std::optional<int> cpus;
  std::optional<std::uint64_t> memory;
  SourceLoc cpus_loc, memory_loc;
  /// `split: {shards: N, by: duration}` (tests: pytest only): its tests across N shards by learned durations.
  int split_shards = 0;
  SourceLoc split_loc;
  RetryPolicy retry;
  TestsSpec tests;
  SourceLoc loc;
  SourceLoc devices_loc;
  SourceLoc if_loc;
  // Where each value that may hold ${{ }} is written, so a finding points at it (0: not written).
  SourceLoc name_loc, run_loc, working_directory_loc;
  std::map<std::string, SourceLoc> env_locs;
};

struct MatrixDef {
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;  // in file order
  std::vector<std::vector<std::pair<std::string, std::string>>> include;
  std::vector<std::vector<std::pair<std::string, std::string>>> exclude;
  SourceLoc loc;
};

struct JobDef {
  std::string file;
  std::string name;
  SourceLoc loc;
  SourceLoc name_loc;
  std::vector<std::string> needs;
  std::vector<SourceLoc> needs_locs;
  std::string if_expr;
  SourceLoc if_loc;
  std::map<std::string, std::string> env;
  std::vector<CacheUse> caches;
  std::optional<ReuseSpec> reuse;
  std::optional<double> timeout_minutes;
  bool continue_on_error = false;
  std::optional<MatrixDef> matrix;
  bool fail_fast = true;
  std::optional<int> max_parallel;
  std::string default_working_directory;
  std::string default_shell;
  bool parallel = false;
  bool toolchain = false;  // `toolchain: ptoas`
  /// `outputs:` NAME -> expression (usually ${{ steps.ID.outputs.X }}), for needs.JOB.outputs.NAME.
  std::vector<std::pair<std::string, std::string>> outputs;
  std::vector<SourceLoc> output_locs;
  SourceLoc env_loc;
  std::vector<StepDef> steps;
};

/// `stem` is the file name without .yml, the job's name when the file sets none.
JobDef load_job_file(const std::string& path, const std::string& display, const std::string& stem,
                     Diagnostics& diags);

/// Reads a `retry:` mapping; shared with nothing else but kept apart for its own tests.
RetryPolicy read_retry(const YAML::Node& node, const std::string& file, Diagnostics& diags);

}  // namespace pto
