#include "server/metrics.h"

#include <cstdio>

namespace pto {

void Histogram::observe(double v) {
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  long long cumulative = 0;
  char buf[128];
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    std::snprintf(buf, sizeof(buf), "%s_bucket{le=\"%g\"} %lld\n", name.c_str(), bounds_[i], cumulative);
    out += buf;
  }
  cumulative += counts_.back();
  std::snprintf(buf, sizeof(buf), "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %g\n%s_count %lld\n", name.c_str(), cumulative,
                name.c_str(), sum_, name.c_str(), count_);
  out += buf;
}

}  // namespace pto
