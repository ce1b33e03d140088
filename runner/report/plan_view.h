#pragma once
// The one rendering of a Plan: JSON for `plan --format json` (and later the HTTP API), text for people.
#include <string>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

namespace pto {

nlohmann::json plan_to_json(const Plan& plan);
nlohmann::json plan_step_to_json(const PlanJob& job, const PlanStep& step);
std::string plan_to_text(const Plan& plan);

/// "~12.0 min (expected-minutes)", "~3.2 min (learned: p90 of 5 runs)", "no estimate": where a step's
/// expected duration comes from, for `plan`, the status and the simulation.
std::string estimate_text(const PlanStep& s);

}  // namespace pto
