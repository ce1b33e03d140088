#include "sched/scheduler.h"

#include <algorithm>
#include <limits>
#include <set>

#include "config/device_spec.h"

namespace pto {

namespace {

std::string cards_word(int n) { return n == 1 ? "1 card" : std::to_string(n) + " cards"; }

struct Pool {
  std::map<int, SchedCard> cards;
  std::vector<std::vector<int>> groups;  // effective: configured groups plus a singleton per ungrouped card
  bool grouped = false;
};

Pool make_pool(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups) {
  Pool p;
  for (const auto& c : cards) p.cards[c.id] = c;
  p.grouped = !groups.empty();
  if (!p.grouped) {
    std::vector<int> all;
    for (const auto& c : cards) all.push_back(c.id);
    p.groups.push_back(all);
    return p;
  }
  std::set<int> grouped;
  for (const auto& g : groups) {
    std::vector<int> members;
    for (int id : g)
      if (p.cards.count(id)) members.push_back(id), grouped.insert(id);
    std::sort(members.begin(), members.end());
    if (!members.empty()) p.groups.push_back(members);
  }
  for (const auto& c : cards)
    if (!grouped.count(c.id)) p.groups.push_back({c.id});
  return p;
}

}  // namespace

ScheduleResult schedule(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups,
                        const std::vector<SchedRequest>& queue, double now, bool explain) {
  constexpr double kUnknown = std::numeric_limits<double>::infinity();
  ScheduleResult out;
  Pool pool = make_pool(cards, groups);
  std::map<int, double> taken;            // assigned in this pass -> expected end
  std::map<std::uint64_t, double> shadow;  // reservation -> when its busy cards are expected free (-inf: never backfill)

  auto end_of = [&](int id) -> double {  // when a busy card is expected to free up; unknown/overrun = kUnknown
    if (auto t = taken.find(id); t != taken.end()) return t->second;
    double u = pool.cards[id].busy_until;
    return u >= now ? u : kUnknown;  // an overrun estimate says nothing any more
  };
  auto fits = [&](int id, const SchedRequest& req) {
    return (req.type.empty() || pool.cards[id].type == req.type) &&
           (!req.only || std::find(req.only->begin(), req.only->end(), id) != req.only->end()) &&
           (!req.avoid || std::find(req.avoid->begin(), req.avoid->end(), id) == req.avoid->end());
  };
  auto available = [&](int id, const SchedRequest& req) {
    const SchedCard& c = pool.cards[id];
    if (!c.free || !c.usable || taken.count(id) || !fits(id, req)) return false;
    auto r = out.reserved.find(id);
    if (r == out.reserved.end()) return true;
    if (req.expected_seconds <= 0) return false;
    return now + req.expected_seconds <= shadow[r->second];
  };
  auto usable_in = [&](const std::vector<int>& g, const SchedRequest& req) {
    int n = 0;
    for (int id : g) n += pool.cards[id].usable && fits(id, req);
    return n;
  };

  // Detailed reasons for the head of the queue; past it, a short one (building a string per queued step per
  // pass made a 1,000-step queue quadratic).
  constexpr std::size_t kDetailedReasons = 64;
  std::size_t blocked_count = 0;
  auto any_card_free = [&] {
    for (const auto& [id, c] : pool.cards)
      if (c.free && c.usable && !taken.count(id)) return true;
    return false;
  };
  auto every_usable_card_reserved = [&] {
    for (const auto& [id, c] : pool.cards)
      if (c.usable && !out.reserved.count(id)) return false;
    return true;
  };
  bool any_usable = false;
  for (const auto& [id, c] : pool.cards) any_usable |= c.usable;
  for (const auto& req : queue) {
    // With no card left to hand out, what follows can neither start nor reserve anything once every card is
    // reserved (or after the detailed head): stop, and leave the rest the queue's generic reason. With no
    // usable card at all (every one drained), go on: each request is then found impossible, and says why.
    if (any_usable && !any_card_free() && (blocked_count >= kDetailedReasons || every_usable_card_reserved()))
      break;
    ++out.examined;
    const int n = std::max(1, req.devices);
    // Only blocked requests get a reason; built when needed (this loop runs for every release).
    auto want = [&] {
      return (req.only ? "card" + std::string(req.only->size() == 1 ? " " : "s ") + join_ids(*req.only) : cards_word(n)) +
             (req.type.empty() ? "" : " of type " + std::string(req.type)) +
             (req.avoid ? " other than " + join_ids(*req.avoid) + " (a retry elsewhere)" : "");
    };
    std::vector<const std::vector<int>*> candidates;
    for (const auto& g : pool.groups)
      if (usable_in(g, req) >= n) candidates.push_back(&g);
    if (candidates.empty()) {
      int usable = 0, drained = 0;
      for (const auto& [id, c] : pool.cards)
        if (fits(id, req)) (c.usable ? usable : drained)++;
      out.impossible.push_back(req.id);
      if (!explain) continue;
      out.waiting_reason[req.id] = "needs " + want() + (pool.grouped ? " in one group" : "") +
                                   " but only " + std::to_string(usable) + " usable (" + std::to_string(drained) +
                                   " drained)";
      continue;
    }
    // Can it start now? Tightest fit: the group left with the fewest available cards.
    const std::vector<int>* best = nullptr;
    int best_left = 0;
    for (const auto* g : candidates) {
      int avail = 0;
      for (int id : *g) avail += available(id, req);
      if (avail < n) continue;
      int left = avail - n;
      if (!best || left < best_left) best = g, best_left = left;
    }
    if (best) {
      SchedAssignment a{req.id, {}};
      double until = req.expected_seconds > 0 ? now + req.expected_seconds : kUnknown;
      // Unreserved cards first, so a backfill eats into a reservation only when it has to.
      for (int pass = 0; pass < 2; ++pass)
        for (int id : *best)
          if (static_cast<int>(a.cards.size()) < n && available(id, req) && (pass == 1 || !out.reserved.count(id)) &&
              !taken.count(id))
            a.cards.push_back(id), taken[id] = until;
      std::sort(a.cards.begin(), a.cards.end());
      out.start.push_back(std::move(a));
      continue;
    }
    if (++blocked_count > kDetailedReasons && !out.reserved.empty()) {
      // Still reserve if a group has unreserved cards (no starvation), but skip the prose.
      bool any_unreserved = false;
      for (const auto* g : candidates)
        for (int id : *g) any_unreserved |= pool.cards[id].usable && !out.reserved.count(id) && fits(id, req);
      if (!any_unreserved) {
        if (explain)
          out.waiting_reason[req.id] = "waiting for " + want() + " behind " +
                                     std::to_string(blocked_count - 1) + " earlier waiting steps";
        continue;
      }
    }
    // Blocked: reserve in the group with the most available cards (then the soonest expected to free up).
    const std::vector<int>* target = nullptr;
    int target_avail = -1;
    double target_ready = 0;
    std::vector<int> target_pick;
    for (const auto* g : candidates) {
      std::vector<int> free_ids, busy_ids;
      for (int id : *g) {
        const SchedCard& c = pool.cards[id];
        if (!c.usable || out.reserved.count(id) || !fits(id, req)) continue;
        (c.free && !taken.count(id) ? free_ids : busy_ids).push_back(id);
      }
      if (static_cast<int>(free_ids.size() + busy_ids.size()) < n) continue;  // others reserved too much here
      std::stable_sort(busy_ids.begin(), busy_ids.end(), [&](int a, int b) { return end_of(a) < end_of(b); });
      std::vector<int> pick = free_ids;
      double ready = now;
      for (int id : busy_ids) {
        if (static_cast<int>(pick.size()) >= n) break;
        pick.push_back(id);
        ready = std::max(ready, end_of(id));
      }
      int avail = static_cast<int>(free_ids.size());
      if (!target || avail > target_avail || (avail == target_avail && ready < target_ready)) {
        target = g;
        target_avail = avail;
        target_ready = ready;
        target_pick = pick;
      }
    }
    if (!target) {
      if (explain)
        out.waiting_reason[req.id] = "waiting for " + want() + (pool.grouped ? " in one group" : "") +
                                     "; the cards it could use are reserved for steps ahead of it in the queue";
      continue;
    }
    std::sort(target_pick.begin(), target_pick.end());
    shadow[req.id] = target_ready == kUnknown ? -kUnknown : target_ready;
    if (!explain) {
      for (int id : target_pick) out.reserved[id] = req.id;
      continue;
    }
    std::string reason = "waiting for " + want() + (pool.grouped ? " in one group" : "");
    std::vector<int> reserved_free;
    std::map<std::string, std::vector<int>> held_by;
    for (int id : target_pick) {
      out.reserved[id] = req.id;
      const SchedCard& c = pool.cards[id];
      if (c.free && !taken.count(id)) reserved_free.push_back(id);
      else held_by[taken.count(id) ? "a step starting now" : c.holder.empty() ? "another step" : c.holder].push_back(id);
    }
    if (n == 1 && !req.only && reserved_free.empty()) {
      // One card, any of several: naming the one it happens to be reserved on would mislead at 3 a.m.
      int usable = 0;
      for (const auto& [id, c] : pool.cards) usable += c.usable && fits(id, req);
      reason = "waiting for " + want() + ": all " + std::to_string(usable) + " usable card" + (usable == 1 ? "" : "s") +
               (req.type.empty() ? "" : " of that type") + " busy";
    } else {
      if (!reserved_free.empty()) reason += "; " + join_ids(reserved_free) + " reserved";
      for (const auto& [holder, ids] : held_by) reason += "; " + join_ids(ids) + " held by " + holder;
    }
    out.waiting_reason[req.id] = reason;
  }
  return out;
}


}  // namespace pto
