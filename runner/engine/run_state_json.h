#pragma once
// A run's state as its engine holds it, whole, to JSON and back (SPEC "Nothing lost when the daemon stops"):
// what a daemon that starts again needs to go on with a run whose steps outlived the last one. Unlike the run's
// JSON for people (report/run_view), nothing is left out or derived: times since the run's start, queue
// places, every test case with its captured output, every failure with its evidence, the leases' marks. Pure:
// `run_state_from_json(run_state_json(r)) == r`, field by field (tests/run_state_json_test.cpp).
#include <nlohmann/json.hpp>

#include "engine/run_state.h"

namespace pto {

nlohmann::json step_state_json(const StepRecord& s);
StepRecord step_state_from_json(const nlohmann::json& j);
nlohmann::json run_state_json(const RunRecord& r);
/// The run's and its jobs' own fields, without their steps (each step is kept on its own as it changes:
/// store/engine_state_journal); run_state_json is this with every job's "steps".
/// `with_file_env` false: without each job's $GITHUB_ENV values (they may be secrets: what is written to disk
/// leaves them out; they go to the step supervisor's memory with the run's handover, HostedRun::handover).
nlohmann::json run_head_json(const RunRecord& r, bool with_file_env = true);
/// Whatever a field that is missing or of another type: its default (a record from an older daemon).
RunRecord run_state_from_json(const nlohmann::json& j);

}  // namespace pto
