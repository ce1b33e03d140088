#include "sched/scheduler.h"

#include <algorithm>
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

ScheduleResult schedule_with_policy(SchedPolicy policy, const std::vector<SchedCard>& cards,
                                    const std::vector<std::vector<int>>& groups,
                                    const std::vector<SchedRequest>& queue) {
  ScheduleResult out;
  Pool pool = make_pool(cards, groups);
  std::set<int> taken;  // assigned in this pass
  bool blocked_ahead = false;
  std::string first_blocked_label;

  auto available = [&](int id) {
    const SchedCard& c = pool.cards[id];
    return c.free && c.usable && !taken.count(id) && !out.reserved.count(id);
  };
  auto usable_in = [&](const std::vector<int>& g) {
    int n = 0;
    for (int id : g) n += pool.cards[id].usable;
    return n;
  };

  for (const auto& req : queue) {
    const int n = std::max(1, req.devices);
    std::vector<const std::vector<int>*> candidates;
    for (const auto& g : pool.groups)
      if (usable_in(g) >= n) candidates.push_back(&g);
    if (candidates.empty()) {
      int usable = 0, drained = 0;
      for (const auto& [id, c] : pool.cards) (c.usable ? usable : drained)++;
      out.impossible.push_back(req.id);
      out.waiting_reason[req.id] = "needs " + cards_word(n) + (pool.grouped ? " in one group" : "") +
                                   " but only " + std::to_string(usable) + " usable (" + std::to_string(drained) +
                                   " drained)";
      continue;
    }
    if (policy == SchedPolicy::Fifo && blocked_ahead) {
      out.waiting_reason[req.id] = "waiting behind " + first_blocked_label + " (first in, first out)";
      continue;
    }
    // Can it start now? Tightest fit: the group left with the fewest available cards.
    const std::vector<int>* best = nullptr;
    int best_left = 0;
    for (const auto* g : candidates) {
      int avail = 0;
      for (int id : *g) avail += available(id);
      if (avail < n) continue;
      int left = avail - n;
      if (!best || left < best_left) best = g, best_left = left;
    }
    if (best) {
      SchedAssignment a{req.id, {}};
      for (int id : *best)
        if (available(id) && static_cast<int>(a.cards.size()) < n) a.cards.push_back(id), taken.insert(id);
      out.start.push_back(std::move(a));
      continue;
    }
    if (!blocked_ahead) first_blocked_label = req.label.empty() ? "an earlier step" : req.label;
    blocked_ahead = true;
    if (policy != SchedPolicy::ReserveAndBackfill) {
      out.waiting_reason[req.id] = "waiting for " + cards_word(n) + (pool.grouped ? " in one group" : "");
      continue;
    }
    // Blocked: reserve in the group with the most available cards (then the soonest expected to free up).
    const std::vector<int>* target = nullptr;
    int target_avail = -1;
    double target_ready = 0;
    std::vector<int> target_pick;
    for (const auto* g : candidates) {
      std::vector<int> free_ids, busy_ids;
      for (int id : *g) {
        if (!pool.cards[id].usable || out.reserved.count(id)) continue;
        (available(id) ? free_ids : busy_ids).push_back(id);
      }
      if (static_cast<int>(free_ids.size() + busy_ids.size()) < n) continue;  // others reserved too much here
      std::stable_sort(busy_ids.begin(), busy_ids.end(),
                       [&](int a, int b) { return pool.cards[a].busy_until < pool.cards[b].busy_until; });
      std::vector<int> pick = free_ids;
      double ready = 0;
      for (int id : busy_ids) {
        if (static_cast<int>(pick.size()) >= n) break;
        pick.push_back(id);
        ready = std::max(ready, pool.cards[id].busy_until);
      }
      int avail = static_cast<int>(free_ids.size());
      if (!target || avail > target_avail || (avail == target_avail && ready < target_ready)) {
        target = g;
        target_avail = avail;
        target_ready = ready;
        target_pick = pick;
      }
    }
    std::string reason = "waiting for " + cards_word(n) + (pool.grouped ? " in one group" : "");
    if (!target) {
      reason += "; the cards it could use are reserved for steps submitted earlier";
      out.waiting_reason[req.id] = reason;
      continue;
    }
    std::sort(target_pick.begin(), target_pick.end());
    std::vector<int> reserved_free;
    std::map<std::string, std::vector<int>> held_by;
    for (int id : target_pick) {
      out.reserved[id] = req.id;
      const SchedCard& c = pool.cards[id];
      if (c.free && !taken.count(id)) reserved_free.push_back(id);
      else held_by[taken.count(id) ? "a step starting now" : c.holder.empty() ? "another step" : c.holder].push_back(id);
    }
    if (!reserved_free.empty()) reason += "; " + join_ids(reserved_free) + " reserved";
    for (const auto& [holder, ids] : held_by) reason += "; " + join_ids(ids) + " held by " + holder;
    out.waiting_reason[req.id] = reason;
  }
  return out;
}

ScheduleResult schedule(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups,
                        const std::vector<SchedRequest>& queue) {
  return schedule_with_policy(SchedPolicy::ReserveAndBackfill, cards, groups, queue);
}

}  // namespace pto
