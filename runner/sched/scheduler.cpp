#include "sched/scheduler.h"

#include <algorithm>
#include <limits>
#include <set>

#include "config/device_spec.h"
#include "util/byte_size.h"

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
                        const std::vector<SchedRequest>& queue, double now, bool explain, const SchedHost* host) {
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

  // The host's CPUs and memory: what is free now, what blocked requests ahead reserved, and the earliest
  // shadow time among those reservations (+inf: none; -inf: one waits on an unknown end, so no backfill).
  const bool hosted = host && host->scheduled();
  std::vector<SchedHost::Use> uses = hosted ? host->in_use : std::vector<SchedHost::Use>{};
  std::int64_t cpu_free = hosted ? host->cpus : 0, mem_free = hosted ? static_cast<std::int64_t>(host->memory) : 0;
  for (const auto& u : uses) cpu_free -= u.cpus, mem_free -= static_cast<std::int64_t>(u.memory);
  std::int64_t cpu_reserved = 0, mem_reserved = 0;
  double host_shadow = kUnknown;
  auto asks_host = [&](const SchedRequest& req) { return hosted && ((host->cpus && req.cpus > 0) || (host->memory && req.memory > 0)); };
  auto host_fits = [&](const SchedRequest& req) {
    if (!asks_host(req)) return true;
    const bool backfill = req.expected_seconds > 0 && now + req.expected_seconds <= host_shadow;
    return (!host->cpus || req.cpus <= cpu_free - (backfill ? 0 : cpu_reserved)) &&
           (!host->memory || static_cast<std::int64_t>(req.memory) <= mem_free - (backfill ? 0 : mem_reserved));
  };
  auto host_wait = [&](const SchedRequest& req) {  // why its CPUs or memory are not there now
    std::string why;
    auto say = [&](const std::string& want, const std::string& used, const std::string& of, std::int64_t reserved, const std::string& r) {
      why += (why.empty() ? "waiting for " : "; and for ") + want + ": " + used + " of " + of + " in use" +
             (reserved > 0 ? ", " + r + " reserved for steps ahead" : "");
    };
    if (host->cpus && req.cpus > cpu_free - cpu_reserved)
      say(cpus_word(req.cpus), std::to_string(host->cpus - cpu_free), std::to_string(host->cpus), cpu_reserved, std::to_string(cpu_reserved));
    if (host->memory && static_cast<std::int64_t>(req.memory) > mem_free - mem_reserved)
      say(format_bytes(req.memory) + " of memory", format_bytes(host->memory - static_cast<std::uint64_t>(mem_free)), format_bytes(host->memory),
          mem_reserved, format_bytes(static_cast<std::uint64_t>(mem_reserved)));
    return why;
  };
  auto take_host = [&](const SchedRequest& req, double until) {
    if (!asks_host(req)) return;
    cpu_free -= host->cpus ? req.cpus : 0;
    mem_free -= host->memory ? static_cast<std::int64_t>(req.memory) : 0;
    uses.push_back({req.cpus, req.memory, until});
  };
  // A blocked request's CPUs and memory are held for it from when enough of them free up (running holders
  // ending in order of their expected ends): its shadow time, as for cards.
  // `not_before`: when its cards are expected (kUnknown: not known, so nothing backfills onto these).
  auto reserve_host = [&](const SchedRequest& req, double not_before) {
    if (!asks_host(req)) return;
    std::vector<const SchedHost::Use*> by_end;
    for (const auto& u : uses) by_end.push_back(&u);
    auto end = [&](const SchedHost::Use* u) { return u->busy_until >= now ? u->busy_until : kUnknown; };
    std::stable_sort(by_end.begin(), by_end.end(), [&](auto* a, auto* b) { return end(a) < end(b); });
    std::int64_t c = cpu_free - cpu_reserved, m = mem_free - mem_reserved;
    auto enough = [&] { return (!host->cpus || req.cpus <= c) && (!host->memory || static_cast<std::int64_t>(req.memory) <= m); };
    double ready = now;
    for (const auto* u : by_end) {
      if (enough()) break;
      c += u->cpus, m += static_cast<std::int64_t>(u->memory), ready = std::max(ready, end(u));
    }
    // Not there even once every running holder ends: what it waits for is reserved already for steps ahead
    // of it (as with cards), so it reserves nothing and bounds no backfill.
    if (!enough()) return;
    ready = not_before == kUnknown ? kUnknown : std::max(ready, not_before);
    cpu_reserved += host->cpus ? req.cpus : 0;
    mem_reserved += host->memory ? static_cast<std::int64_t>(req.memory) : 0;
    host_shadow = std::min(host_shadow, ready == kUnknown ? -kUnknown : ready);
  };
  // Requests without cards wait for nothing the early stop below looks at: it may stop only after the last.
  std::size_t last_cardless = 0;
  bool any_cardless = false;
  for (std::size_t i = 0; i < queue.size(); ++i)
    if (queue[i].devices <= 0 && !queue[i].only) last_cardless = i, any_cardless = true;

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
  for (std::size_t index = 0; index < queue.size(); ++index) {
    const SchedRequest& req = queue[index];
    // With no card left to hand out, what follows can neither start nor reserve anything once every card is
    // reserved (or after the detailed head): stop, and leave the rest the queue's generic reason. With no
    // usable card at all (every one drained), go on: each request is then found impossible, and says why.
    if (any_usable && !any_card_free() && (blocked_count >= kDetailedReasons || every_usable_card_reserved()) &&
        (!any_cardless || index > last_cardless))
      break;
    ++out.examined;
    if (hosted && ((host->cpus && req.cpus > host->cpus) || (host->memory && req.memory > host->memory))) {
      out.impossible.push_back(req.id);
      if (explain)
        out.waiting_reason[req.id] = "needs " + host_share_words(host->cpus && req.cpus > host->cpus ? req.cpus : 0,
                                                                 host->memory && req.memory > host->memory ? req.memory : 0) +
                                     " but the host has " + host_share_words(host->cpus && req.cpus > host->cpus ? host->cpus : 0,
                                                                             host->memory && req.memory > host->memory ? host->memory : 0) +
                                     " (runner.yml host:)";
      continue;
    }
    if (req.devices <= 0 && !req.only) {  // no cards: its CPUs and memory only
      const double until = req.expected_seconds > 0 ? now + req.expected_seconds : kUnknown;
      if (host_fits(req)) {
        take_host(req, until);
        out.start.push_back({req.id, {}});
        continue;
      }
      ++blocked_count;
      if (explain) out.waiting_reason[req.id] = host_wait(req);
      reserve_host(req, now);
      continue;
    }
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
    const bool host_ready = host_fits(req);
    const std::string host_reason = host_ready || !explain ? "" : host_wait(req);
    if (best && host_ready) {
      SchedAssignment a{req.id, {}};
      double until = req.expected_seconds > 0 ? now + req.expected_seconds : kUnknown;
      take_host(req, until);
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
    const bool cards_ready = best != nullptr;  // blocked on CPUs or memory only
    if (++blocked_count > kDetailedReasons && !out.reserved.empty()) {
      // Still reserve if a group has unreserved cards (no starvation), but skip the prose.
      bool any_unreserved = false;
      for (const auto* g : candidates)
        for (int id : *g) any_unreserved |= pool.cards[id].usable && !out.reserved.count(id) && fits(id, req);
      if (!any_unreserved) {
        reserve_host(req, kUnknown);
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
      // As many as it needs (more are free only when it waits for CPUs or memory, not cards).
      std::vector<int> pick(free_ids.begin(), free_ids.begin() + std::min<std::ptrdiff_t>(n, static_cast<std::ptrdiff_t>(free_ids.size())));
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
      reserve_host(req, kUnknown);
      if (explain)
        out.waiting_reason[req.id] = "waiting for " + want() + (pool.grouped ? " in one group" : "") +
                                     "; the cards it could use are reserved for steps ahead of it in the queue";
      continue;
    }
    std::sort(target_pick.begin(), target_pick.end());
    shadow[req.id] = target_ready == kUnknown ? -kUnknown : target_ready;
    reserve_host(req, target_ready);
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
    if (cards_ready) reason = host_reason + "; " + (target_pick.size() == 1 ? "card " : "cards ") + join_ids(target_pick) + " reserved for it";
    else if (!host_reason.empty()) reason += "; and for " + host_reason.substr(std::string("waiting for ").size());
    out.waiting_reason[req.id] = reason;
  }
  return out;
}


}  // namespace pto
