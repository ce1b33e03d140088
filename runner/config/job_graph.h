#pragma once
// Dependency order of jobs by `needs`, and the cycle when there is one.
#include <map>
#include <string>
#include <vector>

namespace pto {

struct JobGraphResult {
  std::vector<std::string> order;  // dependencies before dependants; ties broken by name, so it is deterministic
  std::vector<std::string> cycle;  // non-empty when the graph has a cycle: a -> b -> ... -> a
};

/// `needs` maps each job to the jobs it needs; names not in the map are ignored (reported elsewhere).
JobGraphResult order_jobs(const std::map<std::string, std::vector<std::string>>& needs);

}  // namespace pto
