#pragma once
// What one step's ccache did, from its statistics log (CCACHE_STATSLOG: for each compiler call a `# FILE` line
// and the counters it raised, e.g. direct_cache_hit, cache_miss, remote_storage_hit): calls, hits and misses,
// the figures a cache's hit ratio is made of in the run's JSON, the status and the metrics.
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

struct CacheCounts {
  long long calls = 0;   // cacheable compiler calls (a hit or a miss)
  long long hits = 0;    // from any storage: direct or preprocessed
  long long remote_hits = 0;  // of those, from the protected tier (or the remote)
  long long misses = 0;
  CacheCounts& operator+=(const CacheCounts& o);
  nlohmann::json json() const;
  static CacheCounts from_json(const nlohmann::json& j);
};

/// The counts of a statistics log's text; lines it does not know are ignored.
CacheCounts parse_ccache_stats_log(const std::string& text);

}  // namespace pto
