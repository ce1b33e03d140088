#pragma once
// The test history's reads (read_model/test_queries), on a read-only connection per call to the journal file
// that store/test_history writes: safe on any thread, never in the engine's way (WAL readers do not block the
// writer). Failures answer {"error": ...}, never throw.
#include <string>

#include "read_model/test_queries.h"

namespace pto {

class TestHistoryQueries : public TestQueries {
 public:
  explicit TestHistoryQueries(std::string journal_path) : path_(std::move(journal_path)) {}
  nlohmann::json ref_summary(const std::string& ref, double since, int limit) const override;
  nlohmann::json test_history(const std::string& id, double since, int limit) const override;

 private:
  std::string path_;
};

}  // namespace pto
