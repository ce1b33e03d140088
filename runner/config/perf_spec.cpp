#include "config/perf_spec.h"

#include <regex.h>

#include <cstdlib>

namespace pto {

class PerfSpec::Pattern {
 public:
  /// Compiles `text`; `error` says why not.
  Pattern(const std::string& text, std::string& error) {
    const int rc = regcomp(&re_, text.c_str(), REG_EXTENDED);
    ok_ = rc == 0;
    if (ok_) return;
    char buf[256];
    regerror(rc, &re_, buf, sizeof buf);
    error = buf;
  }
  ~Pattern() {
    if (ok_) regfree(&re_);
  }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;
  bool ok() const { return ok_; }
  std::size_t groups() const { return ok_ ? re_.re_nsub : 0; }
  /// Group 1 of the first match in `line`, if it matches.
  std::optional<std::string> group(const std::string& line) const {
    regmatch_t m[2];
    if (!ok_ || regexec(&re_, line.c_str(), 2, m, 0) != 0 || m[1].rm_so < 0) return std::nullopt;
    return line.substr(static_cast<std::size_t>(m[1].rm_so), static_cast<std::size_t>(m[1].rm_eo - m[1].rm_so));
  }

 private:
  regex_t re_{};
  bool ok_ = false;
};

std::optional<double> PerfSpec::read(const std::string& output) const {
  if (!pattern) return std::nullopt;
  std::optional<double> last;
  std::size_t at = 0;
  while (at < output.size()) {
    std::size_t end = output.find('\n', at);
    if (end == std::string::npos) end = output.size();
    if (end - at <= 4096) {
      const std::string line = output.substr(at, end - at);
      if (line.find('\0') == std::string::npos)
        if (std::optional<std::string> text = pattern->group(line)) {
          char* stop = nullptr;
          const double v = std::strtod(text->c_str(), &stop);
          if (!text->empty() && stop == text->c_str() + text->size() && v > 0) last = v;
        }
    }
    at = end + 1;
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
    std::string error;
    auto re = std::make_shared<const PerfSpec::Pattern>(*v, error);
    if (!re->ok()) {
      m.error_at(m.get("metric"), "perf-metric", "perf: 'metric' is not a regex (POSIX extended, as grep -E): " + error);
      ok = false;
    } else if (re->groups() != 1) {
      m.error_at(m.get("metric"), "perf-metric",
                 "perf: 'metric' needs exactly one group, the number (like 'Total Test Time: ([0-9.]+) us'); it has " +
                     std::to_string(re->groups()));
      ok = false;
    }
    p.pattern = std::move(re);
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
