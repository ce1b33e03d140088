#include "caches/ccache_stats.h"

#include <sstream>

namespace pto {

CacheCounts& CacheCounts::operator+=(const CacheCounts& o) {
  calls += o.calls;
  hits += o.hits;
  remote_hits += o.remote_hits;
  misses += o.misses;
  return *this;
}

nlohmann::json CacheCounts::json() const {
  return {{"calls", calls}, {"hits", hits}, {"remote_hits", remote_hits}, {"misses", misses}};
}

CacheCounts CacheCounts::from_json(const nlohmann::json& j) {
  CacheCounts c;
  if (!j.is_object()) return c;
  auto n = [&](const char* k) { return j.contains(k) && j[k].is_number_integer() ? j[k].get<long long>() : 0; };
  c.calls = n("calls");
  c.hits = n("hits");
  c.remote_hits = n("remote_hits");
  c.misses = n("misses");
  return c;
}

CacheCounts parse_ccache_stats_log(const std::string& text) {
  CacheCounts c;
  std::istringstream in(text);
  bool hit = false, miss = false, remote = false;
  auto close_call = [&] {
    if (hit) {
      ++c.hits;
      c.remote_hits += remote;
    } else if (miss) {
      ++c.misses;
    }
    c.calls += hit || miss;
    hit = miss = remote = false;
  };
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# ", 0) == 0) close_call();
    else if (line == "direct_cache_hit" || line == "preprocessed_cache_hit") hit = true;
    else if (line == "cache_miss") miss = true;
    else if (line == "remote_storage_hit") remote = true;
  }
  close_call();
  return c;
}

}  // namespace pto
