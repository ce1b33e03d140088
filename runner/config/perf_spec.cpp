#include "config/perf_spec.h"

#include <cstdlib>

namespace pto {

std::optional<double> PerfSpec::read(const std::string& output) const {
  if (!pattern) return std::nullopt;
  std::optional<double> last;
  for (std::sregex_iterator it(output.begin(), output.end(), *pattern), end; it != end; ++it) {
    const std::string text = (*it)[1].str();
    char* stop = nullptr;
    const double v = std::strtod(text.c_str(), &stop);
    if (!text.empty() && stop == text.c_str() + text.size() && v > 0) last = v;
  }
  return last;
}

std::optional<PerfSpec> read_perf(const YAML::Node& node, const std::string& file, Diagnostics& diags) {
  PerfSpec p;
  p.loc = loc_of(node);
  MapReader m(node, "perf", {"name", "metric", "unit", "better", "samples", "compare", "threshold-pct", "gate"}, file, diags);
  if (!m.is_map()) return std::nullopt;
  bool ok = true;
  if (auto v = m.string("name")) p.name = *v;
  if (auto v = m.string("metric", true)) {
    p.metric = *v;
    try {
      auto re = std::make_shared<const std::regex>(*v, std::regex::ECMAScript);
      if (re->mark_count() != 1) {
        m.error_at(m.get("metric"), "perf-metric",
                   "perf: 'metric' needs exactly one group, the number (like 'Total Test Time: ([0-9.]+) us'); it has " +
                       std::to_string(re->mark_count()));
        ok = false;
      }
      p.pattern = std::move(re);
    } catch (const std::regex_error& e) {
      m.error_at(m.get("metric"), "perf-metric", std::string("perf: 'metric' is not a regex: ") + e.what());
      ok = false;
    }
  } else {
    ok = false;
  }
  if (auto v = m.string("unit")) p.unit = *v;
  if (auto v = m.string("better")) {
    if (*v == "lower" || *v == "higher") p.lower_is_better = *v == "lower";
    else m.error_at(m.get("better"), "bad-value", "perf: 'better' is lower or higher, got '" + *v + "'"), ok = false;
  }
  if (auto v = m.string("compare")) {
    if (*v == "base" || *v == "history") p.compare = *v == "base" ? PerfSpec::Compare::Base : PerfSpec::Compare::History;
    else m.error_at(m.get("compare"), "bad-value", "perf: 'compare' is base or history, got '" + *v + "'"), ok = false;
  }
  // Pairs: a comparison looks at 4 first, so fewer could never say anything.
  if (auto v = m.integer("samples", p.compare == PerfSpec::Compare::Base ? 4 : 1, 200)) p.samples = static_cast<int>(*v);
  if (auto v = m.number("threshold-pct", 0.1, 100)) p.threshold_pct = *v;
  if (auto v = m.boolean("gate")) p.gate = *v;
  if (!ok) return std::nullopt;
  return p;
}

}  // namespace pto
