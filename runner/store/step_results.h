#pragma once
// StepResults: the green results steps may be reused from (reuse/), in the journal's file on a connection of
// their own: each by its result key, with the scope of the run that made it (its caches' scope: `protected`,
// `pr-N`, `ref-...`, `local`), the run and step it came from, when it finished, its outputs and log, and the
// card-seconds it took (what reusing it saves).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reuse/result_key.h"

struct sqlite3;

namespace pto {

using StepResult = ReusableResult;

class StepResults {
 public:
  static std::unique_ptr<StepResults> open(const std::string& path, std::string& error);
  ~StepResults();
  bool record(const StepResult& r);
  /// The newest result of `key` from one of `scopes` (any scope when empty) that finished at or after `since`.
  std::optional<StepResult> find(const std::string& key, const std::vector<std::string>& scopes, double since);
  /// Results older than `before` go, and those of runs no longer kept (retention).
  bool prune(double before);
  const std::string& error() const { return error_; }

 private:
  explicit StepResults(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::string error_;
};

}  // namespace pto
