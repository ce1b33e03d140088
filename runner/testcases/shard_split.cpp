#include "testcases/shard_split.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace pto {

namespace {

std::vector<std::string> unique_ids(const std::vector<std::string>& ids) {
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const auto& id : ids)
    if (seen.insert(id).second) out.push_back(id);
  return out;
}

/// Each shard's tests back in collection order (the order pytest would run them in one process).
void in_collection_order(TestShards& s, const std::vector<std::string>& order) {
  std::map<std::string, std::size_t> pos;
  for (std::size_t i = 0; i < order.size(); ++i) pos.emplace(order[i], i);
  for (auto& shard : s.tests) std::sort(shard.begin(), shard.end(), [&](const auto& a, const auto& b) { return pos[a] < pos[b]; });
}

}  // namespace

TestShards split_by_duration(const std::vector<std::string>& ids_in, const std::map<std::string, double>& learned, int shards) {
  const std::vector<std::string> ids = unique_ids(ids_in);
  shards = std::max(1, shards);
  TestShards out;
  out.tests.resize(static_cast<std::size_t>(shards));
  out.expected_seconds.assign(static_cast<std::size_t>(shards), 0);
  std::vector<double> known;
  for (const auto& id : ids)
    if (auto it = learned.find(id); it != learned.end() && it->second >= 0) known.push_back(it->second);
  double median = 1;  // nothing learned yet: every test alike, so the split is by count
  if (!known.empty()) {
    std::sort(known.begin(), known.end());
    median = known.size() % 2 ? known[known.size() / 2] : (known[known.size() / 2 - 1] + known[known.size() / 2]) / 2;
  }
  std::vector<std::pair<double, std::size_t>> by_length;  // (duration, collection index)
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto it = learned.find(ids[i]);
    const bool has = it != learned.end() && it->second >= 0;
    out.unknown += !has;
    by_length.push_back({has ? it->second : median, i});
  }
  std::stable_sort(by_length.begin(), by_length.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [seconds, i] : by_length) {
    const std::size_t least = static_cast<std::size_t>(
        std::min_element(out.expected_seconds.begin(), out.expected_seconds.end()) - out.expected_seconds.begin());
    out.tests[least].push_back(ids[i]);
    out.expected_seconds[least] += seconds;
  }
  in_collection_order(out, ids);
  return out;
}

TestShards split_by_file_count(const std::vector<std::string>& ids_in, const std::map<std::string, double>& durations, int shards) {
  const std::vector<std::string> ids = unique_ids(ids_in);
  shards = std::max(1, shards);
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& id : ids) by_file[id.substr(0, id.find("::"))].push_back(id);
  TestShards out;
  out.tests.resize(static_cast<std::size_t>(shards));
  out.expected_seconds.assign(static_cast<std::size_t>(shards), 0);
  const std::size_t files = by_file.size();
  std::size_t k = 0;
  for (const auto& [file, tests] : by_file) {
    const std::size_t shard = k++ * static_cast<std::size_t>(shards) / std::max<std::size_t>(1, files);
    for (const auto& id : tests) {
      out.tests[shard].push_back(id);
      if (auto it = durations.find(id); it != durations.end()) out.expected_seconds[shard] += it->second;
    }
  }
  in_collection_order(out, ids);
  return out;
}

double shard_imbalance(const TestShards& s, const std::map<std::string, double>& durations) {
  std::vector<double> real;
  for (const auto& shard : s.tests) {
    double sum = 0;
    for (const auto& id : shard)
      if (auto it = durations.find(id); it != durations.end()) sum += it->second;
    real.push_back(sum);
  }
  if (real.empty()) return 1;
  const double mean = std::accumulate(real.begin(), real.end(), 0.0) / static_cast<double>(real.size());
  return mean > 0 ? *std::max_element(real.begin(), real.end()) / mean : 1;
}

}  // namespace pto
