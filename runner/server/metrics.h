#pragma once
// Prometheus counters and histograms the daemon keeps, rendered in the text exposition format.
#include <map>
#include <string>
#include <vector>

namespace pto {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<long long> counts_;
  double sum_ = 0;
  long long count_ = 0;
};

struct Metrics {
  Histogram wait_seconds{{0.01, 0.1, 1, 10, 60, 300, 900, 1800, 3600, 7200}};
  Histogram step_seconds{{1, 10, 60, 300, 600, 1200, 1800, 3600, 7200}};
  std::map<std::string, long long> steps_by_result;
  std::map<std::string, long long> runs_by_result;
};

}  // namespace pto
