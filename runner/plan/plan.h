#pragma once
// The Plan: what a run will execute, after the lead job, matrix legs, `models:` expansion and dedupe.
//
// build_plan is pure: the same Project in gives the same Plan out, with no process, clock or file access, so
// `plan`, `lint`, `run` and the daemon all see the same thing and tests need no fixtures on disk.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.h"
#include "config/job_file.h"
#include "config/project.h"
#include "plan/matrix.h"

namespace pto {

/// What the engine does for a step beyond running its command. CollectTests: a split step's collection (its
/// command run with every pytest process collecting only; engine/engine_cases.cpp splits what it found).
enum class StepKind { Command, ToolchainSetup, CollectTests };

struct PlanStep {
  int index = 0;  // position in its job
  std::string id;  // GitHub step id (steps.ID.* in later steps), may be empty
  /// name, run, env values and working-directory may hold ${{ }} for run time (steps, needs, env); the
  /// engine replaces them when the step becomes runnable.
  std::string name;
  StepKind kind = StepKind::Command;
  std::string run;
  std::string shell = "bash";
  std::string working_directory;
  std::map<std::string, std::string> env;  // the step's own env (job env is on the job)
  /// Its named caches, the job's and its own: name -> the variable that gets the directory (caches/).
  std::map<std::string, std::string> caches;
  /// `reuse:` (the step's, else its job's): whether a green result of its inputs may stand in for running it,
  /// and the globs of those inputs (empty: the whole commit).
  bool reuse = true;
  /// `perf:` (config/perf_spec; its name defaulted to the step's): the step is a benchmark, run as samples
  /// and judged (perf/). Never reused: each run measures.
  std::optional<PerfSpec> perf;
  std::vector<std::string> reuse_inputs;
  std::string if_expr;
  /// The `if:` calls success()/failure()/always()/cancelled(): in a parallel job such a step is cleanup and
  /// runs after the others.
  bool if_has_status_function = false;
  int devices = 0;
  /// What it uses of the host beside its cards (`cpus:`, `memory:` in bytes; 0: nothing asked): granted with
  /// the cards, and its cgroup's cpu.max and memory.max.
  int cpus = 0;
  std::uint64_t memory = 0;
  std::string device_type;  // "" = any card
  std::optional<double> timeout_minutes;  // from runnable to end, the wait for cards included
  std::optional<double> queue_timeout_minutes, run_timeout_minutes;
  double expected_minutes = 1;  // for --simulate; `expected_defaulted` when no file said
  bool expected_defaulted = true;
  /// Where expected_minutes comes from: "expected-minutes" (hand-written), "history" (learned from
  /// expected_samples finished runs, store/learned_durations), or "" (none: a 1-minute default for simulation
  /// only; the scheduler treats the step as of unknown length).
  std::string expected_source;
  int expected_samples = 0;
  bool continue_on_error = false;
  RetryPolicy retry;
  TestsSpec tests;  // where its test cases come from (none: judged as a step only)
  /// `split: {shards: N}` plans a step as its collection (kind CollectTests, "NAME (collect)", split_shards N,
  /// no cards) and N shards after it ("NAME (shard I/N)", shard I, collect_step its index), which run at
  /// once, each the step's command with the step's cards and env on the tests split onto it.
  int split_shards = 0;
  int shard = 0, shard_count = 0;
  int collect_step = -1;
  /// A probe of one test (bisection, control runs: plan/probe_plan): the step runs only these test ids.
  std::vector<std::string> only_tests;
  std::string key;
  std::optional<int> deduplicated_from;  // index of the earlier step with the same key
  std::string origin;  // FILE:LINE:COL of the step in its job file (for model steps: its `models:` entry)
  std::string source;  // where its command is written: the example's line for model steps, else == origin
  std::string model;   // for model steps: model file id and example name
  std::string example;
};

struct PlanJob {
  std::string id;    // unique in the plan: the name, or `name (leg values)` for a matrix leg
  std::string name;  // the job's name; `needs` refer to names (all legs of a matrix job)
  std::string file;
  MatrixLeg matrix;
  std::vector<std::string> needs;
  std::string if_expr;
  std::map<std::string, std::string> env;
  std::optional<double> timeout_minutes;
  bool continue_on_error = false;
  bool fail_fast = true;
  int max_parallel = 0;  // 0: unbounded (steps in a parallel job; legs of a matrix job)
  bool parallel = false;
  bool toolchain = false;  // receives the lead job's PTOAS_* environment
  bool lead = false;       // this is the lead job itself
  /// `outputs:` NAME -> expression, evaluated when the job ends (needs.JOB.outputs.NAME in dependants).
  std::vector<std::pair<std::string, std::string>> outputs;
  std::vector<PlanStep> steps;
};

struct Plan {
  std::string ptoas_version;
  std::string arch;
  int pool_size = 0;
  int largest_gang = 0;
  std::vector<PlanJob> jobs;  // dependency order; the lead job first when present

  const PlanJob* find(const std::string& id) const;
  int deduplicated_count() const;
};

struct PlanOptions {
  std::vector<std::string> jobs;  // --job; empty = every job. Selected jobs bring their needs along.
  std::string arch;               // default: uname -m
};

/// Reports selection errors, expression errors, and `devices-exceed-pool`. Expects a project without load
/// errors, but never crashes on one that has them.
Plan build_plan(const Project& project, const PlanOptions& opts, Diagnostics& diags);

std::string host_arch();

/// How a step is named to people everywhere (console, status, holders, summaries, `submit`): "job / step".
std::string step_label(std::string_view job_id, std::string_view step_name);
inline std::string step_label(const PlanJob& job, const PlanStep& step) { return step_label(job.id, step.name); }

}  // namespace pto
