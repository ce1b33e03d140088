#include "read_model/counters.h"

namespace pto {

void Histogram::observe(double v) {
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void LabelledHistogram::observe(const std::string& label_value, double v) {
  by_label_.try_emplace(label_value, bounds_).first->second.observe(v);
}

}  // namespace pto
