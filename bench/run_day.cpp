#include "run_day.h"

#include <algorithm>
#include <limits>
#include <map>

#include "sched/queue_order.h"
#include "sched/start_forecast.h"

namespace pto::bench {

void simulate_day(std::vector<DayRun>& runs, const DayOptions& o) {
  struct Ref {
    std::size_t run, step;
  };
  std::vector<Ref> by_id(1);  // request id -> its step (ids in arrival order, so submit order)
  std::vector<std::size_t> arrivals(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) arrivals[i] = i;
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](auto a, auto b) { return runs[a].arrival < runs[b].arrival; });
  auto step_of = [&](std::uint64_t id) -> DayStep& { return runs[by_id[id].run].steps[by_id[id].step]; };
  auto told = [](const DayStep& s) { return s.estimate < 0 ? s.duration : s.estimate; };

  std::vector<SchedCard> cards;
  for (int c = 0; c < o.cards; ++c) cards.push_back({c, true, true, "", std::numeric_limits<double>::infinity(), ""});
  std::multimap<double, std::uint64_t> ends;  // real end -> request
  std::vector<std::uint64_t> waiting;          // ids, ascending
  ShareLedger ledger;
  std::map<std::uint64_t, SchedHost::Use> cpu_use;  // running request -> the CPUs it holds
  std::size_t next_arrival = 0;
  std::map<std::size_t, std::size_t> left;  // run -> steps not finished
  double t = 0;
  while (next_arrival < arrivals.size() || !ends.empty()) {
    double next = std::numeric_limits<double>::infinity();
    if (next_arrival < arrivals.size()) next = runs[arrivals[next_arrival]].arrival;
    if (!ends.empty()) next = std::min(next, ends.begin()->first);
    t = next;
    while (!ends.empty() && ends.begin()->first <= t) {
      std::uint64_t id = ends.begin()->second;
      ends.erase(ends.begin());
      DayStep& s = step_of(id);
      for (int c : s.cards) cards[c].free = true, cards[c].busy_until = std::numeric_limits<double>::infinity(), cards[c].holder.clear();
      ledger.give_back(s.cards, t);
      cpu_use.erase(id);
      const std::size_t run = by_id[id].run;
      if (--left[run] == 0) runs[run].finished = t, ledger.forget(runs[run].id);
    }
    std::vector<std::size_t> arrived;
    while (next_arrival < arrivals.size() && runs[arrivals[next_arrival]].arrival <= t) {
      const std::size_t r = arrivals[next_arrival++];
      arrived.push_back(r);
      left[r] = runs[r].steps.size();
      if (runs[r].steps.empty()) runs[r].finished = t;
      for (std::size_t k = 0; k < runs[r].steps.size(); ++k) {
        waiting.push_back(by_id.size());
        by_id.push_back({r, k});
      }
    }
    std::vector<SchedRequest> queue;
    for (auto id : waiting) {
      const DayStep& s = step_of(id);
      const DayRun& run = runs[by_id[id].run];
      queue.push_back({id, s.devices, "", told(s), "", nullptr, o.fair_share ? std::string_view(run.id) : std::string_view(),
                       o.fair_share ? run.priority : 0, nullptr, s.cpus, 0});
    }
    SchedHost host{o.cpus, 0, {}};
    for (const auto& [id, u] : cpu_use) host.in_use.push_back(u);
    if (o.forecast && !arrived.empty()) {
      auto f = forecast_starts(cards, o.groups, queue, ledger, t, 100000, o.cpus ? &host : nullptr);
      for (auto id : waiting)
        if (auto it = f.find(id); it != f.end() && step_of(id).predicted < 0) step_of(id).predicted = it->second;
    }
    ScheduleResult r = schedule_queue(cards, o.groups, queue, ledger, t, nullptr, false, o.cpus ? &host : nullptr);
    for (const auto& a : r.start) {
      DayStep& s = step_of(a.request);
      s.start = t;
      s.cards = a.cards;
      const double e = told(s);
      for (int c : a.cards) cards[c].free = false, cards[c].holder = "x", cards[c].busy_until = e > 0 ? t + e : std::numeric_limits<double>::infinity();
      ledger.hold(runs[by_id[a.request].run].id, a.cards, t);
      if (o.cpus && s.cpus) cpu_use[a.request] = {s.cpus, 0, e > 0 ? t + e : std::numeric_limits<double>::infinity()};
      ends.emplace(t + s.duration, a.request);
    }
    std::vector<std::uint64_t> gone;
    for (const auto& a : r.start) gone.push_back(a.request);
    for (auto id : r.impossible) gone.push_back(id);  // never happens with a pool that serves every size
    std::sort(gone.begin(), gone.end());
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(), [&](auto id) { return std::binary_search(gone.begin(), gone.end(), id); }),
                  waiting.end());
  }
}

}  // namespace pto::bench
