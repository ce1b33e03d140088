#pragma once
// The one JSON rendering of runs, jobs and steps: the HTTP API, the journal's records and `submit`'s progress
// all read this shape.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/run_state.h"
#include "plan/plan.h"

namespace pto {

nlohmann::json step_to_json(const RunRecord& r, const Plan& p, int job, int step, double now);
/// A step with `tests:`: its counts, verdict, the failed tests (each at its last attempt, with the log's link)
/// and every attempt's cases.
nlohmann::json step_tests_json(const RunRecord& r, const Plan& p, int job, int step);
/// A split step's collection (`split:`): its shards (tests, expected and real seconds) and their tests summed.
nlohmann::json split_to_json(const RunRecord& r, const Plan& p, int job, int step, double now);
/// A step's estimate as every rendering shows it: null, or {minutes, source ("expected-minutes" | "history"),
/// samples}.
nlohmann::json estimate_to_json(double minutes, const std::string& source, int samples);
/// Which steps a rendering carries (a client's changes since it last looked: server/run_changes); empty: all.
using StepFilter = std::function<bool(int job, int step)>;
nlohmann::json job_to_json(const RunRecord& r, const Plan& p, int job, double now, bool with_steps = true, const StepFilter& only = {});
/// `state`: queued/running/succeeded/failed/cancelled/interrupted; `result` the exit code it ends with (-1 while running).
nlohmann::json run_to_json(const RunRecord& r, const Plan& p, const std::string& state, int result, double now,
                           const StepFilter& only = {});
/// A step's failed tests (its JSON's tests.failed_tests) as lines a person reads, each
/// "    FAILED ID [cause, card N]: first message line (log: SERVER/LOG)", at most `max` and then how many more.
std::string failed_tests_text(const nlohmann::json& step, const std::string& server, std::size_t max = 20);
/// How a step ended from its JSON: "exit 3", "signal 9", "timed out", the error, or "" (not run).
std::string describe_step_end(const nlohmann::json& step);
/// 0.4s, 12.0s, 3m05s; "-" for a negative duration (never started).
std::string format_duration(double seconds);
/// The Markdown table of every job and step for $GITHUB_STEP_SUMMARY, from a run's JSON (so `run` and
/// `submit` write the same summary).
std::string markdown_summary(const nlohmann::json& run);

/// A finished step's outcome as a counter label: succeeded, failed, timed_out, cancelled, skipped, deduplicated.
std::string run_state_name(const RunRecord& r, bool finished, int result);

}  // namespace pto
