#pragma once
// Test suites split across shards by their learned durations (SPEC "Tests split across cards by their
// durations"): the test ids collected once, each given its learned duration (an unknown test counts the
// median of the known ones), then longest first onto the least loaded shard (LPT, as Knapsack Pro, CircleCI
// and pytest-split do). Pure: the engine hands it the ids and the history's durations; bench_schedule compares
// it with pypto's split by counting files.
#include <map>
#include <string>
#include <vector>

namespace pto {

struct TestShards {
  std::vector<std::vector<std::string>> tests;  // per shard, in collection order
  std::vector<double> expected_seconds;         // per shard: the sum of its tests' durations as counted
  int unknown = 0;                              // tests with no learned duration (counted at the median)
};

/// `ids` in collection order (duplicates dropped); `learned`: seconds per test id. `shards` >= 1; a shard may
/// be empty when there are fewer tests than shards. Deterministic: ties go to the lower shard, and equal
/// durations keep collection order.
TestShards split_by_duration(const std::vector<std::string>& ids, const std::map<std::string, double>& learned, int shards);

/// The split pypto makes by hand, for comparison: whole test files (the id before "::"), in name order,
/// `shards` consecutive groups of (nearly) equal file counts.
TestShards split_by_file_count(const std::vector<std::string>& ids, const std::map<std::string, double>& durations, int shards);

/// The slowest shard over the mean of the shards (1.0: perfectly even), by `durations` (the real ones, for a
/// figure; unknown tests count 0).
double shard_imbalance(const TestShards& s, const std::map<std::string, double>& durations);

}  // namespace pto
