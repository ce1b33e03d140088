#include "sched/start_forecast.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_set>

#include "sched/queue_order.h"

namespace pto {

std::map<std::uint64_t, double> forecast_starts(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups,
                                                const std::vector<SchedRequest>& queue, ShareLedger ledger, double now,
                                                std::size_t max_events, const SchedHost* host) {
  constexpr double kUnknown = std::numeric_limits<double>::infinity();
  std::map<std::uint64_t, double> out;
  std::vector<SchedCard> sim = cards;
  std::map<int, std::size_t> index;
  std::map<int, double> ends;  // busy usable cards -> when they are taken to free up
  for (std::size_t i = 0; i < sim.size(); ++i) {
    const SchedCard& c = sim[i];
    index[c.id] = i;
    if (!c.usable || c.free) continue;
    ends[c.id] = std::isinf(c.busy_until) ? now + kUnknownStepSeconds : c.busy_until < now ? now + kOverrunSeconds : c.busy_until;
  }
  // The host's CPUs and memory, played forward as the cards: each use ends at its expected end.
  std::optional<SchedHost> hsim;
  if (host && host->scheduled()) {
    hsim = *host;
    for (auto& u : hsim->in_use)
      u.busy_until = std::isinf(u.busy_until) ? now + kUnknownStepSeconds : u.busy_until < now ? now + kOverrunSeconds : u.busy_until;
  }
  std::vector<SchedRequest> waiting = queue;
  double t = now;
  for (std::size_t pass = 0; pass < max_events && !waiting.empty(); ++pass) {
    ScheduleResult r = schedule_queue(sim, groups, waiting, ledger, t, nullptr, false, hsim ? &*hsim : nullptr);
    std::unordered_set<std::uint64_t> gone(r.impossible.begin(), r.impossible.end());
    for (const auto& a : r.start) {
      auto req = std::find_if(waiting.begin(), waiting.end(), [&](const SchedRequest& q) { return q.id == a.request; });
      if (req == waiting.end()) continue;
      out[a.request] = t;
      gone.insert(a.request);
      const double e = req->expected_seconds;
      for (int c : a.cards) {
        SchedCard& s = sim[index[c]];
        s.free = false;
        s.busy_until = e > 0 ? t + e : kUnknown;  // what the scheduler will be told, as the dispatcher tells it
        ends[c] = t + (e > 0 ? e : kUnknownStepSeconds);
      }
      ledger.hold(req->share, a.cards, t);
      if (hsim && (req->cpus || req->memory)) hsim->in_use.push_back({req->cpus, req->memory, t + (e > 0 ? e : kUnknownStepSeconds)});
    }
    if (!gone.empty())
      waiting.erase(std::remove_if(waiting.begin(), waiting.end(), [&](const SchedRequest& q) { return gone.count(q.id) > 0; }),
                    waiting.end());
    if (waiting.empty() || (ends.empty() && (!hsim || hsim->in_use.empty()))) break;
    // The next card (or CPUs and memory) to free up; everything freeing at that moment.
    double next = kUnknown;
    for (const auto& [c, e] : ends) next = std::min(next, e);
    if (hsim)
      for (const auto& u : hsim->in_use) next = std::min(next, u.busy_until);
    t = std::max(t, next);
    if (hsim)
      hsim->in_use.erase(std::remove_if(hsim->in_use.begin(), hsim->in_use.end(), [&](const SchedHost::Use& u) { return u.busy_until <= t; }),
                         hsim->in_use.end());
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second > t) {
        ++it;
        continue;
      }
      SchedCard& s = sim[index[it->first]];
      s.free = true;
      s.busy_until = kUnknown;
      s.holder.clear();
      ledger.give_back({it->first}, t);
      it = ends.erase(it);
    }
  }
  return out;
}

}  // namespace pto
