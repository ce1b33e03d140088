#pragma once
// A step's launch (exec/executor.h StepLaunch) as JSON and back: what the daemon hands a step's supervisor
// (supervise/), which starts and holds the step outside the daemon (SPEC "Nothing lost when the daemon stops").
// Everything that says how to run it travels, the run's secret masks included (over a root-only socket, never
// logged); the callbacks do not (the supervisor writes the log; a line-by-line console is `run`'s, which does
// not use supervisors). Pure.
#include <nlohmann/json.hpp>

#include "exec/executor.h"

namespace pto {

nlohmann::json launch_json(const StepLaunch& l);
/// What is missing or of another type gets its default.
StepLaunch launch_from_json(const nlohmann::json& j);

nlohmann::json outcome_json(const StepOutcome& o);
StepOutcome outcome_from_json(const nlohmann::json& j);

}  // namespace pto
