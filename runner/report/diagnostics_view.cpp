#include "report/diagnostics_view.h"

namespace pto {

nlohmann::json diagnostics_to_json(const Diagnostics& d) {
  nlohmann::json findings = nlohmann::json::array();
  int errors = 0, warnings = 0;
  for (const auto& x : d.items()) {
    findings.push_back({{"file", x.file},
                        {"line", x.line},
                        {"col", x.col},
                        {"severity", x.severity == Severity::Error ? "error" : "warning"},
                        {"rule", x.rule},
                        {"message", x.message}});
    (x.severity == Severity::Error ? errors : warnings)++;
  }
  return {{"findings", findings}, {"errors", errors}, {"warnings", warnings}};
}

std::string diagnostics_to_text(const Diagnostics& d) {
  std::string out;
  for (const auto& x : d.items()) out += format_diagnostic(x) + "\n";
  return out;
}

}  // namespace pto
