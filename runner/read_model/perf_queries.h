#pragma once
// PerfQueries: perf steps' history as GETs read it (GET /api/v1/perf, the /perf page), kept by
// store/perf_history. Safe to call from several threads at once (the API's workers).
#include <string>
#include <utility>
#include <vector>

#include "perf/perf_record.h"

namespace pto {

class PerfQueries {
 public:
  virtual ~PerfQueries() = default;
  /// The newest `limit` records of a metric on a ref (and card type, unless empty), oldest first.
  virtual std::vector<PerfRecord> series(const std::string& metric, const std::string& ref, const std::string& card_type, int limit) const = 0;
  /// Each metric with records, with each ref it has them on.
  virtual std::vector<std::pair<std::string, std::string>> metrics() const = 0;
};

}  // namespace pto
