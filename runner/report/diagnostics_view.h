#pragma once
// Lint findings as text lines or as `{"findings": [...]}`.
#include <string>

#include <nlohmann/json.hpp>

#include "config/diagnostics.h"

namespace pto {

nlohmann::json diagnostics_to_json(const Diagnostics& d);
std::string diagnostics_to_text(const Diagnostics& d);

}  // namespace pto
