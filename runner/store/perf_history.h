#pragma once
// PerfHistory: each perf step's samples (SPEC "Performance, judged like an experiment"), by metric, ref and
// card type, in the journal's file on a connection of its own: what `compare: history` judges a run against,
// what GET /api/v1/perf and the /perf page show. One row per run's step: its samples (and, for `compare:
// base`, the base's), their median, the cards, the commit, the verdict.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mutex>

#include "read_model/perf_queries.h"

struct sqlite3;

namespace pto {

/// Its one connection is used under a mutex: the engine thread records and reads a series when a perf step
/// ends, the API's workers read (a few rows each; rare).
class PerfHistory : public PerfQueries {
 public:
  static std::unique_ptr<PerfHistory> open(const std::string& path, std::string& error);
  ~PerfHistory() override;
  bool record(const PerfRecord& r);
  std::vector<PerfRecord> series(const std::string& metric, const std::string& ref, const std::string& card_type, int limit) const override;
  std::vector<std::pair<std::string, std::string>> metrics() const override;
  /// Rows of a ref that is no branch (a pull request's, a probe's) go once their run is no longer kept; a
  /// branch's rows are its history and stay.
  bool prune();
  std::string error() const;

 private:
  explicit PerfHistory(sqlite3* db) : db_(db) {}
  mutable std::mutex mu_;
  sqlite3* db_;
  mutable std::string error_;
};

}  // namespace pto
