#pragma once
// A granted lease as JSON and back: what the daemon hands the step supervisor with the lease's cards' flocks,
// so that the next daemon grants it again (SPEC "Nothing lost when the daemon stops": a leased command keeps
// its cards across a restart). Pure.
#include <nlohmann/json.hpp>

#include "lease/lease.h"

namespace pto {

nlohmann::json lease_state_json(const Lease& l);
/// What is missing or of another type gets its default.
Lease lease_state_from_json(const nlohmann::json& j);

}  // namespace pto
