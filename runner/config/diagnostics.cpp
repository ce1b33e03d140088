#include "config/diagnostics.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace pto {

bool is_input_error_rule(const std::string& rule) {
  static const std::set<std::string> lint_rules = {"duplicate-step", "inline-toolchain-literal", "script-injection", "unused-model", "drift",
                                                  "missing-script", "no-host", "stale-baseline"};
  return !lint_rules.count(rule);
}

void Diagnostics::error(const std::string& file, int line, int col, const std::string& rule,
                        const std::string& message) {
  items_.push_back({file, line, col, Severity::Error, rule, message});
}

void Diagnostics::warning(const std::string& file, int line, int col, const std::string& rule,
                          const std::string& message) {
  items_.push_back({file, line, col, Severity::Warning, rule, message});
}

void Diagnostics::note(const std::string& file, int line, int col, const std::string& rule, const std::string& message) {
  items_.push_back({file, line, col, Severity::Note, rule, message});
}

std::string to_string(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

bool Diagnostics::has_errors() const {
  return std::any_of(items_.begin(), items_.end(), [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

bool Diagnostics::has_input_errors() const {
  return std::any_of(items_.begin(), items_.end(), [](const Diagnostic& d) {
    return d.severity == Severity::Error && is_input_error_rule(d.rule);
  });
}

void Diagnostics::promote_warnings() {
  for (auto& d : items_)
    if (d.severity == Severity::Warning) d.severity = Severity::Error;
}

void Diagnostics::sort() {
  std::stable_sort(items_.begin(), items_.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.file, a.line, a.col) < std::tie(b.file, b.line, b.col);
  });
}

std::string format_diagnostic(const Diagnostic& d) {
  std::string out = d.file;
  if (d.line > 0) out += ":" + std::to_string(d.line) + ":" + std::to_string(d.col);
  out += ": " + to_string(d.severity) + ": ";
  out += d.message;
  out += " [" + d.rule + "]";
  return out;
}

}  // namespace pto
