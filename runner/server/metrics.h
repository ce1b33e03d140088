#pragma once
// /metrics: the Prometheus text exposition (version 0.0.4) of the daemon's read model and of the counters and
// histograms it keeps (read_model/counters.h). One small formatter with no fixed-size buffers (a name or label of any length is
// written whole) and label values escaped by the format's rules; `promtool check metrics` checks its output
// in the tests (tests/service_test.cpp).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "read_model/counters.h"

namespace pto {

struct HostView;

using Labels = std::vector<std::pair<std::string, std::string>>;

/// Writes metric families in the text format: a family's HELP and TYPE once, then its samples.
class PromText {
 public:
  void family(const std::string& name, const char* type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double value);
  void histogram(const std::string& name, const Labels& labels, const Histogram& h);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

std::string render_metrics(const HostView& view, const Metrics& m, double uptime_seconds);

}  // namespace pto
