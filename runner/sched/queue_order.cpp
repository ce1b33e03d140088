#include "sched/queue_order.h"

#include <algorithm>
#include <map>
#include <queue>
#include <string_view>
#include <tuple>

namespace pto {

namespace {

double cost_of(const SchedRequest& r) {
  return std::max(1, r.devices) * (r.expected_seconds > 0 ? r.expected_seconds : kUnknownStepSeconds);
}

}  // namespace

std::vector<SchedRequest> order_queue(const std::vector<SchedRequest>& queue, const ShareLedger& ledger, double now,
                                      std::size_t limit, std::vector<double>* tags) {
  // One run (or one share and priority) is the queue as submitted: found before any grouping, since this runs
  // at every release of cards over the whole queue (bench/dispatch_overhead.sh: 1,000 steps of one run).
  bool one_kind = true;
  for (const auto& r : queue) one_kind &= r.share == queue.front().share && r.priority == queue.front().priority;
  if (one_kind && !tags) return {queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(std::min(limit, queue.size()))};
  // Each run's requests in submit order; the runs merged by (priority, tag, submit order).
  std::map<std::string_view, std::vector<const SchedRequest*>> runs;
  for (const auto& r : queue) runs[r.share].push_back(&r);
  struct Head {
    int priority;
    double tag;
    std::uint64_t id;
    const std::vector<const SchedRequest*>* run;
    std::size_t next;
    bool operator<(const Head& o) const {  // std::priority_queue is a max-heap: "less" means "later"
      return std::tie(o.priority, tag, id) > std::tie(priority, o.tag, o.id);
    }
  };
  std::priority_queue<Head> heads;
  for (const auto& [share, reqs] : runs) {
    const SchedRequest* first = reqs.front();
    heads.push({first->priority, ledger.used(share, now), first->id, &reqs, 0});
  }
  std::vector<SchedRequest> out;
  out.reserve(std::min(limit, queue.size()));
  while (!heads.empty() && out.size() < limit) {
    Head h = heads.top();
    heads.pop();
    const SchedRequest* r = (*h.run)[h.next];
    out.push_back(*r);
    if (tags) tags->push_back(h.tag);
    if (++h.next < h.run->size()) {
      const SchedRequest* n = (*h.run)[h.next];
      heads.push({n->priority, h.tag + cost_of(*r), n->id, h.run, h.next});
    }
  }
  return out;
}

ScheduleResult schedule_queue(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups,
                              const std::vector<SchedRequest>& queue, const ShareLedger& ledger, double now,
                              std::vector<SchedRequest>* ordered, bool explain, const SchedHost* host) {
  constexpr std::size_t kHead = 128;
  std::vector<SchedRequest> q = order_queue(queue, ledger, now, kHead);
  ScheduleResult r = schedule(cards, groups, q, now, explain, host);
  if (r.examined == q.size() && q.size() < queue.size()) {
    q = order_queue(queue, ledger, now);
    r = schedule(cards, groups, q, now, explain, host);
  }
  if (ordered) *ordered = std::move(q);
  return r;
}

}  // namespace pto
