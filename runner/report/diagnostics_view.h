#pragma once
// Lint findings as text lines, as `{"findings": [...]}`, or, inside GitHub Actions, as annotations.
#include <string>

#include <nlohmann/json.hpp>

#include "config/diagnostics.h"
#include "report/actions_output.h"

namespace pto {

nlohmann::json diagnostics_to_json(const Diagnostics& d);
std::string diagnostics_to_text(const Diagnostics& d);
/// The findings of a `{"findings": [...]}` answer (the daemon's 400 for a commit that does not load).
Diagnostics diagnostics_from_json(const nlohmann::json& findings);
/// Where a person or a workflow reads them: inside Actions one `::error`/`::warning file=,line=,col=::` per
/// finding (each part escaped: a message quotes definition text), else `file:line:col: error: ...` lines.
void print_findings(ActionsOutput& out, const Diagnostics& d);

}  // namespace pto
