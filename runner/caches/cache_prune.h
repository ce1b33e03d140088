#pragma once
// The caches kept within their bounds (runner.yml caches.max-size, caches.pr-max-age-days), by the daemon's
// retention (store/retention) at start, after each run and hourly, on a worker thread (a cache may hold many
// files): a scope's tier (a pull request's, a branch's) unused for pr-max-age-days goes whole; then, while a
// cache's tiers together are over max-size, its least recently used files go first (ccache's `update-mtime`
// keeps a hit's entry young), never one touched in the last 10 minutes (a build may be reading it). The pull
// request's being closed is not known to a daemon here: its tier goes by its age.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/runner_config.h"

namespace pto {

struct CacheUsage {
  std::uint64_t bytes = 0;  // what its tiers hold after pruning
  int scopes = 0;           // tiers of pull requests and other refs
};

/// Blocking. Each cache under cfg.dir by name, after pruning at `now` (seconds since the epoch); what went is
/// added to `removed` (one line each: a tier, or a count of files).
std::map<std::string, CacheUsage> prune_caches(const CachesConfig& cfg, double now, std::vector<std::string>& removed);

}  // namespace pto
