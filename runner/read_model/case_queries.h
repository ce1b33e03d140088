#pragma once
// TestQueries: the test history as GETs read it (GET /api/v1/tests?ref=, GET /api/v1/tests/{id}, the /tests
// page). The history is too large for memory (a year of pypto is ~2 million rows), so these are queries, made
// by store/case_history_queries on a connection of their own. Called on the API's workers, never on the
// engine thread: implementations are safe to call from several threads at once.
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

class TestQueries {
 public:
  virtual ~TestQueries() = default;
  /// A ref's tests since `since` (epoch seconds): counts, and the `limit` most flaky, slowest and most failing.
  virtual nlohmann::json ref_summary(const std::string& ref, double since, int limit) const = 0;
  /// One test's newest `limit` results (every ref) and its counts per ref since `since`.
  virtual nlohmann::json test_history(const std::string& id, double since, int limit) const = 0;
};

}  // namespace pto
