#pragma once
// The state of one run: every job and step, with the times, cards, exit codes and reasons that the console,
// the simulation report, the journal and the HTTP status are rendered from. Only the RunEngine writes it.
#include <cstdint>
#include <map>

#include <optional>
#include <string>
#include <vector>

#include "caches/ccache_stats.h"
#include "engine/failure_evidence.h"
#include "exec/executor.h"
#include "plan/plan.h"
#include "testcases/verdict.h"

namespace pto {

enum class StepState { Pending, Waiting, Running, Succeeded, Failed, TimedOut, Cancelled, Skipped, Deduplicated, Interrupted, Reused };
enum class JobState { Pending, Running, Succeeded, Failed, Cancelled, Skipped };

std::string to_string(StepState s);
std::string to_string(JobState s);
bool is_final(StepState s);
bool is_final(JobState s);

/// One execution of a step on its cards (a retried step has several).
struct Interval {
  double start = 0, end = 0;  // seconds since the run started (engine clock)
  std::vector<int> cards;
  int attempt = 1;
};

struct StepRecord {
  StepState state = StepState::Pending;
  int attempt = 0;
  std::vector<int> cards;
  std::string node;          // where it ran, when the executor placed it (Slurm's node name)
  std::string executor_job;  // the executor's id for it (the Slurm job id)
  std::string created, runnable, started, finished;  // ISO 8601 UTC
  double runnable_at = -1, started_at = -1, finished_at = -1;
  double queued_at = -1;  // this attempt's request for cards (timeout-minutes counts from here)
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string wait_reason;
  std::string error;
  std::string log_path;
  std::vector<Interval> intervals;
  /// Each failed attempt: its number, cards, cause and evidence, and the notes of the cards it was charged to.
  struct Failure {
    int attempt = 0;
    std::vector<int> cards;
    FailureEvidence evidence;
    std::vector<std::string> card_notes;
    std::string lease;  // a failed lease of the attempt (its id), in lease_failures
  };
  std::vector<Failure> failures;
  /// Leases its harness took (task-submit) whose commands failed, each with its cause: evidence for its cards
  /// and, when the step fails, for the step's cause.
  std::vector<Failure> lease_failures;
  std::vector<int> leased;     // the cards its current attempt held by lease
  std::string lease_markers;   // the harness marker lines its current attempt's leases reported
  std::vector<int> charged;    // cards its current attempt was charged to already (once each)
  std::string cause;    // the step's: its last failure's cause, `flaky` when it passed after a failure of the code
  std::string verdict;  // one line a person reads: "failed on card 4, passed on card 6: card 4 drained (...)"
  std::vector<int> avoid;  // cards a retry elsewhere must not get
  std::map<std::string, std::string> outputs;  // from $GITHUB_OUTPUT
  std::string summary;  // what it wrote to $GITHUB_STEP_SUMMARY (Markdown, at most 1 MiB, as GitHub keeps)
  /// Its ccache caches' calls, hits and misses over its attempts (caches/ccache_stats), by cache name.
  std::map<std::string, CacheCounts> caches;
  /// Its result key (reuse/result_key) when its run may reuse results, and, when it was `reused`, where from.
  std::string result_key;
  struct ReusedFrom {
    std::string run, step, label, log;
    double card_seconds = 0;
  };
  std::optional<ReusedFrom> reused_from;
  /// A step with `perf:` (engine/engine_perf.cpp): each execution is a sample, on the cards of the first; the
  /// numbers its output gave, where the current sample's output begins in its log, and the judgement.
  struct Perf {
    std::vector<double> samples;
    std::vector<int> cards;
    std::uint64_t log_offset = 0;
    std::string change;   // slower | faster | none | "" (not judged yet, or nothing to judge against)
    std::string verdict;  // "slower by 12.1% since run R ...", "no change beyond +-5% over 12 runs"
    std::vector<double> base_samples;  // `compare: base`: the merge base's, paired with `samples`
    bool awaiting_pair = false;  // paired: its sample is in, the other build's is awaited (not journaled)
  };
  std::optional<Perf> perf;
  bool wrote_env = false;  // its final attempt changed $GITHUB_ENV or $GITHUB_PATH for later steps (not kept)
  /// A step with `tests:` (engine/engine_cases.cpp): every attempt's test cases, their sum, why the last
  /// attempt's reports could not be read, and whether its current attempt reruns only the tests not yet done.
  std::vector<TestCase> tests;
  TestsSummary tests_summary;
  std::string tests_error;
  bool tests_rerun = false;
  /// Cards its current attempt's leases took from inside a test (task-submit saw PYTEST_CURRENT_TEST): that
  /// test's cards.
  std::map<std::string, std::vector<int>> test_leases;
  /// Those tests whose lease failed by its card's doing: the line that said so.
  std::map<std::string, std::string> test_lease_faults;
  /// A shard of a split step: the tests its collection split onto it, in collection order, and the sum of
  /// their learned durations (-1: not split yet). A split step's collection: the tests it found and how many of
  /// them had no learned duration (-1: not collected yet).
  /// Its control run on the merge base (bisect/control_runs): base, run, result (also-fails | passes |
  /// unknown) and the note its verdict carries; empty while none.
  struct Control {
    std::string base, run, result, note;
  };
  Control control;
  std::vector<std::string> shard_tests;
  double shard_expected_seconds = -1;
  int collected = -1, collected_unknown = 0;
  // engine bookkeeping
  bool resolved = false;     // its ${{ }} were replaced (once, when it first became runnable)
  std::uint64_t order = 0;   // place in the card queue, kept across retries
  std::uint64_t ticket = 0;  // current queue ticket while waiting
  std::uint64_t held = 0;    // the granted request's ticket while it holds CPUs or memory (given back at its end)
  std::uint64_t handle = 0;  // executor handle while running
  /// Its processes ended and its reports are being read (off the engine's thread): how they ended, kept so a
  /// daemon that takes the run over meanwhile judges that end again rather than calling the step lost.
  std::optional<StepOutcome> ended;
};

struct JobRecord {
  JobState state = JobState::Pending;
  std::string started, finished;
  double started_at = -1, finished_at = -1;
  bool failed = false;     // a step failed (not continue-on-error)
  bool cancelled = false;  // fail-fast, job timeout, or the run was cancelled
  bool timed_out = false;
  std::string reason;      // why skipped/cancelled
  std::size_t next_step = 0;        // sequential jobs: the next step to decide
  std::size_t first_unsettled = 0;  // parallel jobs: every step before it is final
  std::map<std::string, std::string> file_env;  // from its steps' $GITHUB_ENV, for later steps
  std::vector<std::string> path_prepend;         // from $GITHUB_PATH, the newest first
  std::map<std::string, std::string> outputs;   // its `outputs:`, evaluated when it ends
  std::vector<StepRecord> steps;
};

struct RunRecord {
  std::string id;
  std::string created, finished;
  bool cancelled = false;
  int cancel_signal = 0;
  std::string cancel_reason;  // why, when not a person's cancel ("superseded by run ID")
  std::string superseded_by;  // the newer run of the same pull request that cancelled this one
  bool infrastructure_failure = false;
  std::vector<std::string> infrastructure_problems;
  std::map<std::string, std::string> toolchain_env;  // PTOAS_* from the lead job
  bool simulated = false;  // --simulate: steps slept, no test ran (views say nothing of tests then)
  std::vector<JobRecord> jobs;
};

}  // namespace pto
