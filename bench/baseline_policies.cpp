#include "baseline_policies.h"

namespace pto::bench {

ScheduleResult schedule_with_policy(SchedPolicy policy, const std::vector<SchedCard>& cards,
                                    const std::vector<std::vector<int>>& groups,
                                    const std::vector<SchedRequest>& queue, double now) {
  if (policy == SchedPolicy::ReserveAndBackfill) return schedule(cards, groups, queue, now);
  ScheduleResult out;
  std::vector<SchedCard> left = cards;  // cards handed out in this pass are busy for the requests after
  for (const auto& req : queue) {
    ScheduleResult one = schedule(left, groups, {req}, now);
    out.examined++;
    for (auto id : one.impossible) out.impossible.push_back(id);
    if (one.start.empty()) {
      out.waiting_reason[req.id] = one.waiting_reason[req.id];
      if (policy == SchedPolicy::Fifo && one.impossible.empty()) {
        for (std::size_t i = out.examined; i < queue.size(); ++i)
          out.waiting_reason[queue[i].id] = "waiting behind an earlier step (first in, first out)";
        break;
      }
      continue;
    }
    for (int c : one.start[0].cards)
      for (auto& sc : left)
        if (sc.id == c) sc.free = false;
    out.start.push_back(std::move(one.start[0]));
  }
  return out;
}

}  // namespace pto::bench
