#include "report/diagnostics_view.h"

namespace pto {

nlohmann::json diagnostics_to_json(const Diagnostics& d) {
  nlohmann::json findings = nlohmann::json::array();
  int errors = 0, warnings = 0, notes = 0;
  for (const auto& x : d.items()) {
    findings.push_back({{"file", x.file},
                        {"line", x.line},
                        {"col", x.col},
                        {"severity", to_string(x.severity)},
                        {"rule", x.rule},
                        {"message", x.message}});
    (x.severity == Severity::Error ? errors : x.severity == Severity::Warning ? warnings : notes)++;
  }
  return {{"findings", findings}, {"errors", errors}, {"warnings", warnings}, {"notes", notes}};
}

std::string diagnostics_to_text(const Diagnostics& d) {
  std::string out;
  for (const auto& x : d.items()) out += format_diagnostic(x) + "\n";
  return out;
}

Diagnostics diagnostics_from_json(const nlohmann::json& findings) {
  Diagnostics d;
  if (!findings.is_array()) return d;
  for (const auto& f : findings) {
    if (!f.is_object()) continue;
    Diagnostic x;
    x.file = f.value("file", "");
    x.line = f.value("line", 0);
    x.col = f.value("col", 0);
    const std::string sev = f.value("severity", "error");
    x.severity = sev == "warning" ? Severity::Warning : sev == "note" ? Severity::Note : Severity::Error;
    x.rule = f.value("rule", "");
    x.message = f.value("message", "");
    d.add(x);
  }
  return d;
}

void print_findings(ActionsOutput& out, const Diagnostics& d) {
  if (!out.github()) {
    out.text(diagnostics_to_text(d));
    return;
  }
  for (const auto& x : d.items()) {
    CommandProperties props = {{"file", x.file}};
    if (x.line > 0) props.insert(props.end(), {{"line", std::to_string(x.line)}, {"col", std::to_string(x.col)}});
    // GitHub's annotation levels: error, warning, notice.
    const char* level = x.severity == Severity::Error ? "error" : x.severity == Severity::Warning ? "warning" : "notice";
    out.command(level, props, x.message + " [" + x.rule + "]");
  }
}

}  // namespace pto
