#include "config/job_graph.h"

#include <algorithm>
#include <functional>
#include <set>

namespace pto {

JobGraphResult order_jobs(const std::map<std::string, std::vector<std::string>>& needs) {
  JobGraphResult result;
  enum Mark { White, Grey, Black };
  std::map<std::string, Mark> mark;
  std::vector<std::string> stack;
  // Iterative DFS would be needed only for tens of thousands of chained jobs; definitions stay far below that,
  // and a chain that deep is still bounded by the number of job files.
  std::function<bool(const std::string&)> visit = [&](const std::string& name) -> bool {
    mark[name] = Grey;
    stack.push_back(name);
    auto it = needs.find(name);
    std::vector<std::string> deps = it == needs.end() ? std::vector<std::string>{} : it->second;
    std::sort(deps.begin(), deps.end());
    for (const auto& d : deps) {
      if (!needs.count(d)) continue;
      if (mark[d] == Grey) {
        auto start = std::find(stack.begin(), stack.end(), d);
        result.cycle.assign(start, stack.end());
        result.cycle.push_back(d);
        return false;
      }
      if (mark[d] == White && !visit(d)) return false;
    }
    stack.pop_back();
    mark[name] = Black;
    result.order.push_back(name);
    return true;
  };
  for (const auto& [name, _] : needs) mark[name] = White;
  for (const auto& [name, _] : needs)
    if (mark[name] == White && !visit(name)) {
      result.order.clear();
      return result;
    }
  return result;
}

}  // namespace pto
