#include "host/dispatcher.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <limits>

#include "sched/queue_order.h"
#include "sched/start_forecast.h"
#include "util/clock.h"
#include "util/steady_seconds.h"

namespace pto {

struct Dispatcher::Pending {
  std::uint64_t ticket;
  int devices;
  std::vector<int> only;
  std::string type;
  std::string label;
  std::string share;
  std::vector<int> avoid;
  int cpus;
  std::uint64_t memory;
  double expected_seconds;
  double queued_at;
  std::string since;
  Grant grant;
  Impossible impossible;
  std::string reason;
};

struct Dispatcher::Poller {
  explicit Poller(boost::asio::io_context& io) : timer(io), watch(io) {}
  boost::asio::steady_timer timer;
  bool armed = false;
  boost::asio::steady_timer watch;  // a daemon's watch of the cards it does not hold
  unsigned ticks = 0;
};

void Dispatcher::set_watch_outside_when_idle(bool watch) {
  const bool start = watch && !watch_outside_when_idle_;
  watch_outside_when_idle_ = watch;
  if (start) watch_outside();
}

void Dispatcher::watch_outside() {
  // Taking the file scan (a pass over /proc) every fifth tick only: the flocks are one read of /proc/locks.
  const bool found = pool_.watch_outside(poller_->ticks++ % 5 == 0);
  if (found && on_change_) on_change_();
  if (found) schedule_pump();  // the queue's reasons name them
  poller_->watch.expires_after(std::chrono::seconds(1));
  poller_->watch.async_wait([this](boost::system::error_code ec) {
    if (!ec && watch_outside_when_idle_) watch_outside();
  });
}

Dispatcher::Dispatcher(boost::asio::io_context& io, DevicePool& pool)
    : io_(io), pool_(pool), poller_(std::make_unique<Poller>(io)) {}

Dispatcher::~Dispatcher() = default;

std::uint64_t Dispatcher::request(CardRequest req, Grant on_grant, Impossible on_impossible) {
  // Places are times (µs since the epoch, unique), the same on every daemon: a place kept from before (a
  // retry's, or a step an earlier daemon queued and this one took over) comes before every later new one, and a
  // client asking again after a restart takes a place by when it first asked. Places are the queue's keys, so
  // a new one never equals a kept one (the kept request would be dropped as replaced).
  const auto now_us = static_cast<std::uint64_t>(epoch_now() * 1e6);
  next_ticket_ = std::max({next_ticket_, req.order, now_us});
  std::uint64_t ticket = ++next_ticket_;
  std::uint64_t key = req.order ? req.order : ticket;
  if (!req.order && req.since_us && req.since_us < key) {
    key = req.since_us;
    while (pending_.count(key)) ++key;
  }
  if (!req.only.empty()) req.devices = static_cast<int>(req.only.size());
  // More than this host has (definitions written for a larger host, run on a workstation): it takes the whole
  // host, waiting until all of it is free. Against the hosts they are written for, lint says so (exceeds-host).
  if (host_.cpus) req.cpus = std::min(req.cpus, host_.cpus);
  if (host_.memory) req.memory = std::min(req.memory, host_.memory);
  auto p = std::make_shared<Pending>(Pending{ticket, req.devices, std::move(req.only), std::move(req.type), std::move(req.label),
                                             std::move(req.share), std::move(req.avoid), req.cpus, req.memory, req.expected_seconds, steady_seconds(), iso_now(), std::move(on_grant),
                                             std::move(on_impossible), "queued"});
  if (auto old = pending_.find(key); old != pending_.end()) drop_pending(old);
  pending_shares_[p->share]++;
  pending_[key] = p;
  order_of_ticket_[ticket] = key;
  schedule_pump();
  return ticket;
}

void Dispatcher::withdraw(std::uint64_t ticket) {
  auto it = order_of_ticket_.find(ticket);
  if (it == order_of_ticket_.end()) return;
  if (auto p = pending_.find(it->second); p != pending_.end()) drop_pending(p);
  order_of_ticket_.erase(it);
  schedule_pump();
}

void Dispatcher::release(const std::vector<int>& cards) {
  pool_.release(cards);
  ledger_.give_back(cards, steady_seconds());
  // Scheduling right away (not posted): the release-to-next-exec latency is the figure users wait on.
  pump();
}

void Dispatcher::release_hold(std::uint64_t ticket) {
  if (held_.erase(ticket)) schedule_pump();
}

void Dispatcher::set_host_budget(int cpus, std::uint64_t memory) {
  host_.cpus = std::max(0, cpus);
  host_.memory = memory;
  schedule_pump();
}

SchedHost Dispatcher::host_snapshot() const {
  SchedHost h{host_.cpus, host_.memory, {}};
  h.in_use.reserve(held_.size());
  for (const auto& [ticket, use] : held_) h.in_use.push_back(use);
  return h;
}

Dispatcher::HostUse Dispatcher::host_use() const {
  HostUse u{host_.cpus, 0, host_.memory, 0};
  for (const auto& [ticket, use] : held_) u.cpus_in_use += use.cpus, u.memory_in_use += use.memory;
  return u;
}

void Dispatcher::poke() { schedule_pump(); }

std::string Dispatcher::charge(int card, const std::string& run, const std::string& what) {
  std::string note = pool_.charge(card, run, what, epoch_now());
  schedule_pump();  // a card drained by it is out of the schedule now
  return note;
}

std::string Dispatcher::failing_elsewhere(int card, const std::string& run) { return pool_.failing_elsewhere(card, run, epoch_now()); }

void Dispatcher::set_priority(const std::string& share, int priority) {
  priority_[share] = priority;
  schedule_pump();
}

void Dispatcher::forget(const std::string& share) {
  priority_.erase(share);
  ledger_.forget(share);
}

std::string Dispatcher::reason_at(const Pending& p, std::size_t position) const {
  if (position < unexamined_from_ && !p.reason.empty()) return p.reason;
  return "waiting for " + std::to_string(p.devices) + (p.devices == 1 ? " card" : " cards") +
         ": every card is busy or reserved for " + std::to_string(position) + " step(s) ahead";
}

const std::map<int, std::uint64_t>& Dispatcher::reserved() {
  refresh_reasons();
  return reserved_;
}

std::vector<QueueEntry> Dispatcher::queue() {
  refresh_reasons();
  std::vector<QueueEntry> out;
  double now = steady_seconds();
  refresh_forecast(now);
  std::vector<double> tags;
  const std::vector<SchedRequest> ordered = order_queue(submit_order(), ledger_, now, static_cast<std::size_t>(-1), &tags);
  for (std::size_t position = 0; position < ordered.size(); ++position) {
    const Pending& p = *pending_.at(ordered[position].id);
    QueueEntry e{p.ticket, p.label, p.devices, p.cpus, p.memory, reason_at(p, position), now - p.queued_at, p.since};
    e.share = p.share;
    e.priority = ordered[position].priority;
    e.run_used_card_seconds = ledger_.used(p.share, now);
    e.tag = tags[position];
    if (auto f = forecast_.find(ordered[position].id); f != forecast_.end()) e.eta_seconds = std::max(0.0, f->second - now);
    out.push_back(std::move(e));
  }
  return out;
}

void Dispatcher::refresh_forecast(double now) {
  // Playing the queue forward costs a scheduling pass per expected start; once a second is plenty for people
  // reading it (the status page polls every 2 s) and keeps it off the per-release path.
  // A request that arrived since is forecast within 50 ms (its `submit` prints the first answer it gets).
  bool missing = false;
  for (const auto& [order, p] : pending_) missing |= !forecast_.count(order);
  if (forecast_at_ >= 0 && now - forecast_at_ < (missing ? 0.05 : 1.0)) return;
  forecast_at_ = now;
  const SchedHost host = host_snapshot();
  forecast_ = forecast_starts(pool_.snapshot(), pool_.groups(), submit_order(), ledger_, now, 100000, &host);
}

void Dispatcher::drop_pending(std::map<std::uint64_t, std::shared_ptr<Pending>>::iterator it) {
  if (it == pending_.end()) return;
  if (auto s = pending_shares_.find(it->second->share); s != pending_shares_.end() && --s->second <= 0) pending_shares_.erase(s);
  pending_.erase(it);
}

std::vector<SchedRequest> Dispatcher::submit_order(std::size_t limit) const {
  std::vector<SchedRequest> queue;
  queue.reserve(std::min(limit, pending_.size()));
  // Neighbours are mostly of one run: its priority is looked up once for them (a pass per release of cards).
  const std::string* last_share = nullptr;
  int priority = 0;
  for (const auto& [order, p] : pending_) {
    if (queue.size() == limit) break;
    if (!last_share || *last_share != p->share) {
      auto pr = priority_.find(p->share);
      priority = pr == priority_.end() ? 0 : pr->second;
      last_share = &p->share;
    }
    queue.push_back({order, p->devices, p->label, p->expected_seconds, p->type, p->only.empty() ? nullptr : &p->only, p->share,
                     priority, p->avoid.empty() ? nullptr : &p->avoid, p->cpus, p->memory});
  }
  return queue;
}

void Dispatcher::schedule_pump() {
  if (pump_posted_) return;
  pump_posted_ = true;
  boost::asio::post(io_, [this] {
    pump_posted_ = false;
    pump();
  });
}

ScheduleResult Dispatcher::schedule_pending(double now) {
  std::vector<SchedRequest> ordered;
  // One run waiting (the common case of `run`, and of a quiet daemon): its order is its submit order, and the
  // pass looks at the queue's head first, as schedule_queue does; the whole queue is built only when the head
  // cannot use the free cards. This pass runs at every release of cards.
  ScheduleResult r;
  const SchedHost host = host_snapshot();
  if (pending_shares_.size() == 1 && pending_.size() > kOneRunHead) {
    r = schedule_queue(pool_.snapshot(), pool_.groups(), submit_order(kOneRunHead), ledger_, now, &ordered, true, &host);
    if (r.examined == ordered.size())
      r = schedule_queue(pool_.snapshot(), pool_.groups(), submit_order(), ledger_, now, &ordered, true, &host);
  } else {
    r = schedule_queue(pool_.snapshot(), pool_.groups(), submit_order(), ledger_, now, &ordered, true, &host);
  }
  reserved_ = r.reserved;
  for (std::size_t k = 0; k < r.examined && k < ordered.size(); ++k) {  // the rest get reason_at()'s generic one
    auto it = r.waiting_reason.find(ordered[k].id);
    if (it != r.waiting_reason.end()) pending_.at(ordered[k].id)->reason = std::move(it->second);
  }
  // Drained cards may come back (an operator's undrain): a daemon keeps such a step waiting, saying why,
  // where `run` in the foreground fails it at once.
  if (wait_for_drained_)
    for (auto order : r.impossible)
      if (auto it = pending_.find(order); it != pending_.end() && servable_once_undrained(*it->second))
        it->second->reason += "; waiting for a drained card to return (pto-runner devices --undrain)";
  unexamined_from_ = r.examined;
  reasons_stale_ = false;
  return r;
}

bool Dispatcher::servable_once_undrained(const Pending& p) const {
  // More CPUs or memory than the host has, or no cards asked: no card coming back changes that.
  if ((host_.cpus && p.cpus > host_.cpus) || (host_.memory && p.memory > host_.memory) || (p.devices <= 0 && p.only.empty()))
    return false;
  auto fits = [&](const CardStatus& c) {
    return (p.type.empty() || c.type == p.type) && (p.only.empty() || std::count(p.only.begin(), p.only.end(), c.id)) &&
           !std::count(p.avoid.begin(), p.avoid.end(), c.id);
  };
  const auto cards = pool_.status();
  int n = std::max(1, p.devices), total = 0;
  for (const auto& c : cards) total += fits(c);
  if (n == 1 || pool_.groups().empty()) return total >= n;
  for (const auto& g : pool_.groups()) {
    int in_group = 0;
    for (const auto& c : cards) in_group += fits(c) && std::count(g.begin(), g.end(), c.id);
    if (in_group >= n) return true;
  }
  return false;
}

void Dispatcher::refresh_reasons() {
  // After grants the reasons computed in that pass say "a step starting now" for the cards just handed out;
  // recomputed here, when someone reads them, rather than with a second pass on every release.
  if (reasons_stale_ && !pending_.empty()) schedule_pending(steady_seconds());
  reasons_stale_ = false;
}

void Dispatcher::pump() {
  // A lock held by another process turns up only when acquiring; then that card counts as busy and the
  // schedule is recomputed, a bounded number of times (each retry marks at least one more card busy).
  if (pending_.empty()) reserved_.clear();  // nobody waits: nothing is reserved
  for (int attempt = 0; attempt < 64 && !pending_.empty(); ++attempt) {
    double now = steady_seconds();
    ScheduleResult r = schedule_pending(now);
    bool lock_conflict = false;
    std::vector<std::pair<std::shared_ptr<Pending>, std::vector<int>>> granted;
    for (const auto& a : r.start) {
      auto p = pending_[a.request];
      std::string why;
      double expected_end = p->expected_seconds > 0 ? now + p->expected_seconds : std::numeric_limits<double>::infinity();
      if (!pool_.acquire(a.cards, p->label, expected_end, why)) {
        p->reason = "waiting: " + why;
        lock_conflict = true;
        break;
      }
      ledger_.hold(p->share, a.cards, now);
      if ((host_.cpus && p->cpus) || (host_.memory && p->memory)) held_[p->ticket] = {p->cpus, p->memory, expected_end};
      drop_pending(pending_.find(a.request));
      order_of_ticket_.erase(p->ticket);
      granted.emplace_back(p, a.cards);
    }
    std::vector<std::shared_ptr<Pending>> impossible;
    for (auto order : r.impossible) {
      auto it = pending_.find(order);
      if (it == pending_.end()) continue;
      if (wait_for_drained_ && servable_once_undrained(*it->second)) {
        continue;  // a daemon keeps it waiting (see schedule_pending)
      }
      impossible.push_back(it->second);
      order_of_ticket_.erase(it->second->ticket);
      drop_pending(it);
    }
    reasons_stale_ = !granted.empty();
    for (auto& [p, cards] : granted) p->grant(cards);
    for (auto& p : impossible) p->impossible(p->reason);
    if (pending_.empty()) reserved_.clear();
    // One pass places everything that can start; only a lock taken by another process calls for another.
    if (!lock_conflict) break;
  }
  if (on_change_) on_change_();  // the queue and its reasons may have changed: the daemon's read model
  // Cards another program uses are looked at again: soon while someone waits for them, and every second for a
  // daemon's status even when nobody does (a foreground `run` does not: its loop must run out of work).
  if (pool_.any_held_outside() && !poller_->armed && (!pending_.empty() || watch_outside_when_idle_)) {
    poller_->armed = true;
    poller_->timer.expires_after(std::chrono::milliseconds(pending_.empty() ? 1000 : 250));
    poller_->timer.async_wait([this](boost::system::error_code ec) {
      poller_->armed = false;
      if (ec) return;
      pool_.refresh_outside();
      pump();
    });
  }
}

void Dispatcher::adopt(const std::vector<int>& cards, const std::vector<int>& fds, const std::string& label, const std::string& share) {
  pool_.adopt(cards, fds, label);
  ledger_.hold(share, cards, steady_seconds());
}

std::vector<int> Dispatcher::lock_fds(const std::vector<int>& cards) const { return pool_.lock_fds(cards); }

}  // namespace pto
