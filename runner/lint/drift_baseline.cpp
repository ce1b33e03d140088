#include "lint/drift_baseline.h"

#include <yaml-cpp/yaml.h>

#include "config/yaml_map.h"

namespace pto {

std::vector<BaselineEntry> load_drift_baseline(const std::string& path, const std::string& display, Diagnostics& diags) {
  std::vector<BaselineEntry> out;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    diags.error(display, 0, 0, "unreadable", "cannot read the baseline " + display);
    return out;
  } catch (const YAML::Exception& e) {
    diags.error(display, e.mark.line + 1, e.mark.column + 1, "yaml-syntax", e.msg);
    return out;
  }
  if (!root || root.IsNull()) return out;  // an empty baseline: nothing is deliberate
  if (!root.IsSequence()) {
    diags.error(display, root.Mark().line + 1, root.Mark().column + 1, "wrong-type",
                "the baseline is a list of {finding: TEXT, reason: WHY}");
    return out;
  }
  for (const auto& item : root) {
    const int line = item.Mark().line + 1, col = item.Mark().column + 1;
    if (!item.IsMap()) {
      diags.error(display, line, col, "wrong-type", "a baseline entry is {finding: TEXT, reason: WHY}");
      continue;
    }
    BaselineEntry e;
    e.line = line;
    e.col = col;
    for (const auto& kv : item) {
      const std::string key = kv.first.Scalar();
      if (key != "finding" && key != "reason" && key != "rule") {
        diags.error(display, kv.first.Mark().line + 1, kv.first.Mark().column + 1, "unknown-key",
                    "unknown key '" + key + "' in a baseline entry (finding, reason, rule)");
        continue;
      }
      if (!kv.second.IsScalar() || kv.second.Scalar().empty()) {
        diags.error(display, kv.second.Mark().line + 1, kv.second.Mark().column + 1, "wrong-type", "'" + key + "' is a non-empty string");
        continue;
      }
      (key == "finding" ? e.finding : key == "reason" ? e.reason : e.rule) = kv.second.Scalar();
    }
    if (e.finding.empty() || e.reason.empty()) {
      diags.error(display, line, col, "missing-key",
                  std::string("a baseline entry needs '") + (e.finding.empty() ? "finding" : "reason") + "': every deliberate difference says why");
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

void apply_drift_baseline(const std::vector<BaselineEntry>& entries, const std::string& display, Diagnostics& diags) {
  std::vector<int> used(entries.size(), 0);
  for (Diagnostic& d : diags.items_for_update()) {
    if (d.severity == Severity::Note) continue;
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (d.rule == entries[i].rule && d.message.find(entries[i].finding) != std::string::npos) {
        ++used[i];
        d.severity = Severity::Note;
        d.message = "deliberate (" + entries[i].reason + "): " + d.message;
        break;
      }
  }
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (!used[i])
      diags.error(display, entries[i].line, entries[i].col, "stale-baseline",
                  "no " + entries[i].rule + " finding matches '" + entries[i].finding + "': the difference it records is gone; remove the entry");
}

}  // namespace pto
