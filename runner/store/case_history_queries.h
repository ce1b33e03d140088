#pragma once
// The test history's reads (read_model/case_queries), on a read-only connection per call to the journal file
// that store/case_history writes: safe on any thread, never in the engine's way (WAL readers do not block the
// writer). Failures answer {"error": ...}, never throw.
#include <map>
#include <string>
#include <vector>

#include "read_model/case_queries.h"

namespace pto {

class TestHistoryQueries : public TestQueries {
 public:
  explicit TestHistoryQueries(std::string journal_path) : path_(std::move(journal_path)) {}
  nlohmann::json ref_summary(const std::string& ref, double since, int limit) const override;
  nlohmann::json test_history(const std::string& id, double since, int limit) const override;
  /// Each test's learned duration in seconds, for splitting a suite across shards (testcases/shard_split): the
  /// median of its newest kLearnedTestSamples passed attempts, on any ref. Tests never passed are absent; an
  /// unreadable history answers nothing (the split then counts every test alike).
  std::map<std::string, double> learned_seconds(const std::vector<std::string>& ids) const;
  static constexpr int kLearnedTestSamples = 5;
  /// Whether `test` was flaky (failed, then passed on the same commit) on `ref` since `since` (epoch seconds)
  /// in another run than `run`: a flaky test of `run` that was not is a new one (notify: new-flaky-test).
  bool flaky_before(const std::string& test, const std::string& ref, double since, const std::string& run) const;

 private:
  std::string path_;
};

}  // namespace pto
