#include "lease/lease_book.h"

#include <algorithm>

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <spdlog/spdlog.h>

#include "config/device_spec.h"
#include "exec/cgroup_tree.h"
#include "exec/process_sweep.h"
#include "sched/device_pool.h"
#include "util/random_hex.h"
#include "util/clock.h"

namespace pto {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(steady_now() - t).count(); }
template <typename D>
Clock::duration to_duration(D seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
}  // namespace

struct LeaseBook::Timers {
  explicit Timers(boost::asio::io_context& io) : watchdog(io) {}
  boost::asio::steady_timer watchdog;
  bool watchdog_armed = false;
  std::map<std::string, std::unique_ptr<boost::asio::steady_timer>> waits;  // per waiting lease
  std::map<std::string, std::unique_ptr<boost::asio::steady_timer>> kills;  // per lease being revoked
};

std::string to_string(LeaseState s) {
  switch (s) {
    case LeaseState::Waiting: return "waiting";
    case LeaseState::Granted: return "granted";
    case LeaseState::Ended: return "ended";
    case LeaseState::Revoked: return "revoked";
  }
  return "?";
}

LeaseBook::LeaseBook(boost::asio::io_context& io, CardBroker& broker, double heartbeat_timeout_seconds,
                     double kill_grace_seconds)
    : io_(io),
      broker_(broker),
      heartbeat_timeout_(heartbeat_timeout_seconds),
      kill_grace_(kill_grace_seconds),
      timers_(std::make_unique<Timers>(io)) {}

LeaseBook::~LeaseBook() = default;

std::string LeaseBook::create(LeaseRequest req, Granted granted, Refused refused) {
  auto l = std::make_unique<Lease>();
  l->id = new_lease_id();
  l->state = LeaseState::Waiting;
  l->created = iso_now();
  // A run's leases carry the run's marker prefix, so recovery after a crash finds them with the run's steps.
  l->marker = ProcessMarker::for_lease(req.run_id, l->id).text();
  l->request = std::move(req);
  const std::string id = l->id;
  const LeaseRequest& r = l->request;
  // A run's leases are its card-time too (fair share); an operator's lease is a share of its own.
  CardRequest cr{r.devices, r.device_type, "lease " + id + ": " + r.label, 0, 0, r.device_ids, r.run_id.empty() ? id : r.run_id};
  for (int c : r.avoid)
    if (!std::count(r.device_ids.begin(), r.device_ids.end(), c)) cr.avoid.push_back(c);
  if (r.waiting_since > 0) cr.since_us = static_cast<std::uint64_t>(std::clamp(r.waiting_since, epoch_now() - 86400, epoch_now()) * 1e6);
  refused_[id] = std::move(refused);
  Lease* lease = l.get();
  leases_[id] = std::move(l);
  if (r.wait_seconds > 0) {
    auto t = std::make_unique<boost::asio::steady_timer>(io_);
    t->expires_after(to_duration(r.wait_seconds));
    t->async_wait([this, id](boost::system::error_code ec) {
      if (ec) return;
      auto it = leases_.find(id);
      if (it == leases_.end() || it->second->state != LeaseState::Waiting) return;
      finish(*it->second, LeaseState::Ended, "no card within " + std::to_string(static_cast<long long>(it->second->request.wait_seconds)) +
                                       " s (the wait timeout)", "wait timeout");
    });
    timers_->waits[id] = std::move(t);
  }
  lease->ticket = broker_.request(
      std::move(cr),
      [this, id, granted = std::move(granted)](const std::vector<int>& cards) {
        auto it = leases_.find(id);
        if (it == leases_.end()) {  // ended while the grant was on its way
          broker_.release(cards);
          return;
        }
        Lease& g = *it->second;
        g.state = LeaseState::Granted;
        g.ticket = 0;
        g.cards = cards;
        g.granted = iso_now();
        g.granted_at = g.last_heartbeat = steady_now();
        g.cgroup = make_cgroup_ ? make_cgroup_(id) : CgroupTree::instance().make_child();
        refused_.erase(id);
        timers_->waits.erase(id);
        arm_watchdog();
        if (on_change_) on_change_();
        granted(g);
      },
      [this, id](const std::string& why) {
        auto it = leases_.find(id);
        if (it == leases_.end()) return;
        it->second->ticket = 0;
        auto refuse = std::move(refused_[id]);
        refused_.erase(id);
        timers_->waits.erase(id);
        ended_by_reason_["refused"]++;
        leases_.erase(it);
        if (on_change_) on_change_();
        if (refuse) refuse(409, "no card of this host can ever serve this lease: " + why);
      });
  if (on_change_) on_change_();
  return id;
}

void LeaseBook::restore(Lease lease, double held_seconds) {
  auto l = std::make_unique<Lease>(std::move(lease));
  l->state = LeaseState::Granted;
  l->ticket = 0;
  l->last_heartbeat = steady_now();
  l->granted_at = steady_now() - to_duration(std::max(0.0, held_seconds));
  const std::string id = l->id;
  leases_[id] = std::move(l);
  arm_watchdog();
  if (on_change_) on_change_();
}

bool LeaseBook::heartbeat(const std::string& id) {
  auto it = leases_.find(id);
  if (it == leases_.end() || it->second->state == LeaseState::Revoked || it->second->state == LeaseState::Ended) return false;
  it->second->last_heartbeat = steady_now();
  return true;
}

bool LeaseBook::end(const std::string& id, const std::string& why, bool by_client, std::function<void()> done, LeaseReport report) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  Lease& l = *it->second;
  if (by_client && l.state == LeaseState::Granted) l.report = std::move(report);
  if (by_client && l.state == LeaseState::Granted && (l.cgroup.empty() || !CgroupTree::populated(l.cgroup))) {
    // No /proc sweep on the hot path: the client waited for its command and killed its group (and its
    // cgroup is empty: nothing escaped the group). Its client has started its one command and will start no
    // other, so its cgroup may be handed on: the first process to enter a fresh cgroup is what made a lease's
    // grant several times slower (bench/README.md, task-submit). A revoked lease's cgroup is never handed on.
    CgroupTree::instance().recycle(l.cgroup, /*known_empty=*/true);
    l.state = LeaseState::Ended;
    ended_by_reason_["released"]++;
    if (on_ended_) on_ended_("released", seconds_since(l.granted_at));
    if (on_granted_end_) on_granted_end_(l);
    broker_.release(l.cards);
    leases_.erase(id);
    if (on_change_) on_change_();
    if (done) done();
    return true;
  }
  finish(l, LeaseState::Ended, why, by_client ? "released" : "ended by request", std::move(done));
  return true;
}

void LeaseBook::end_all(const std::string& why) {
  std::vector<Lease*> all;
  for (auto& [id, l] : leases_) all.push_back(l.get());
  for (Lease* l : all) finish(*l, LeaseState::Revoked, why, "daemon stopping");
}

void LeaseBook::end_run(const std::string& run_id, const std::string& why) {
  std::vector<Lease*> of_run;
  for (auto& [id, l] : leases_)
    if (l->request.run_id == run_id) of_run.push_back(l.get());
  for (Lease* l : of_run) finish(*l, LeaseState::Revoked, why, "run ended");
}

void LeaseBook::end_step(const std::string& run_id, const StepId& step, const std::string& why) {
  std::vector<Lease*> of_step;
  for (auto& [id, l] : leases_)
    if (l->request.run_id == run_id && l->request.step == step && (l->state == LeaseState::Waiting || l->state == LeaseState::Granted))
      of_step.push_back(l.get());
  for (Lease* l : of_step) finish(*l, LeaseState::Revoked, why, "step ended");
}

int LeaseBook::cards_of_run(const std::string& run_id) const {
  int n = 0;
  for (const auto& [id, l] : leases_)
    if (l->request.run_id == run_id && (l->state == LeaseState::Waiting || l->state == LeaseState::Granted))
      n += l->state == LeaseState::Granted ? static_cast<int>(l->cards.size())
           : l->request.device_ids.empty() ? l->request.devices
                                           : static_cast<int>(l->request.device_ids.size());
  return n;
}

void LeaseBook::finish(Lease& l, LeaseState state, const std::string& why, const std::string& reason_key,
                       std::function<void()> done) {
  const std::string id = l.id;
  if (l.state == LeaseState::Waiting) {
    if (l.ticket) broker_.withdraw(l.ticket);
    timers_->waits.erase(id);
    auto refuse = std::move(refused_[id]);
    refused_.erase(id);
    ended_by_reason_[reason_key]++;
    leases_.erase(id);
    if (on_change_) on_change_();
    if (refuse) refuse(reason_key == "wait timeout" ? 504 : 410, why);
    if (done) done();
    return;
  }
  if (l.state != LeaseState::Granted) {  // already being revoked: told when that is over
    if (done) waiting_for_end_[id].push_back(std::move(done));
    return;
  }
  if (done) waiting_for_end_[id].push_back(std::move(done));
  l.state = state;
  l.ended = iso_now();
  l.end_reason = why;
  ended_by_reason_[reason_key]++;
  if (on_ended_) on_ended_(reason_key, seconds_since(l.granted_at));
  if (on_granted_end_) on_granted_end_(l);
  // Whatever still carries the lease's marker is killed before the cards are handed on: SIGTERM, then
  // SIGKILL after the grace. A client that released normally has nothing left, so its cards go at once.
  const std::string marker = l.marker, cgroup = l.cgroup;
  // Everything left: what carries the marker and, where cgroups contain leases, whatever is in its cgroup
  // (also a process that left the group and scrubbed its environment).
  auto left = [marker, cgroup](int sig) {
    int n = kill_marked_processes(marker, sig, sig == SIGKILL ? 0 : 1);
    if (!cgroup.empty()) n += CgroupTree::signal_all(cgroup, sig);
    return n;
  };
  auto gone = [marker, cgroup] {
    return find_marked_processes(marker).empty() && (cgroup.empty() || !CgroupTree::populated(cgroup));
  };
  if (left(SIGTERM) == 0) {
    CgroupTree::remove(cgroup);
    broker_.release(l.cards);
    leases_.erase(id);
    if (on_change_) on_change_();
    ended(id);
    return;
  }
  auto deadline = steady_now() + to_duration(kill_grace_);
  auto t = std::make_unique<boost::asio::steady_timer>(io_);
  auto* timer = t.get();
  timers_->kills[id] = std::move(t);
  auto check = std::make_shared<std::function<void(boost::system::error_code)>>();
  auto killed = std::make_shared<bool>(false);
  *check = [this, id, cgroup, left, gone, deadline, timer, check, killed](boost::system::error_code ec) {
    if (ec) return;
    bool past = steady_now() >= deadline;
    if (past && !*killed) {
      left(SIGKILL);
      *killed = true;  // SIGKILL is not instant: give the dying a moment (up to 5 s) to leave the cgroup
    }
    const bool all_gone = gone();
    if (all_gone || steady_now() >= deadline + std::chrono::seconds(5)) {
      auto it = leases_.find(id);
      if (it != leases_.end()) {
        if (!all_gone) {
          // Alive 5 s after SIGKILL (uninterruptible sleep in a driver): the host's problem, as for a step.
          // Its cards are charged with it; they are freed, since nothing here can end it.
          const std::string what = "lease " + id + ": a process of its command outlived SIGKILL by 5 s";
          spdlog::warn("{} (cards {})", what, join_ids(it->second->cards));
          broker_.report_outcome(it->second->cards, true, what);
        }
        CgroupTree::remove(cgroup);
        broker_.release(it->second->cards);
      }
      leases_.erase(id);
      if (on_change_) on_change_();
      ended(id);
      boost::asio::post(io_, [this, id] { timers_->kills.erase(id); });  // not from inside its own handler
      return;
    }
    timer->expires_after(std::chrono::milliseconds(100));
    timer->async_wait(*check);
  };
  timer->expires_after(std::chrono::milliseconds(100));
  timer->async_wait(*check);
}

void LeaseBook::ended(const std::string& id) {
  auto it = waiting_for_end_.find(id);
  if (it == waiting_for_end_.end()) return;
  auto callbacks = std::move(it->second);
  waiting_for_end_.erase(it);
  for (auto& f : callbacks) f();
}

void LeaseBook::arm_watchdog() {
  if (timers_->watchdog_armed) return;
  timers_->watchdog_armed = true;
  timers_->watchdog.expires_after(std::chrono::milliseconds(500));
  timers_->watchdog.async_wait([this](boost::system::error_code ec) {
    timers_->watchdog_armed = false;
    if (ec) return;
    std::vector<std::pair<Lease*, std::string>> revoke;
    bool any_granted = false;
    for (auto& [id, l] : leases_) {
      if (l->state != LeaseState::Granted) continue;
      any_granted = true;
      if (seconds_since(l->last_heartbeat) > heartbeat_timeout_)
        revoke.push_back({l.get(), "its client stopped heartbeating (gone for " +
                                       std::to_string(static_cast<int>(seconds_since(l->last_heartbeat))) + " s)"});
      else if (l->request.max_seconds > 0 && seconds_since(l->granted_at) > l->request.max_seconds)
        revoke.push_back({l.get(), "it ran past its max-seconds (" +
                                       std::to_string(static_cast<long long>(l->request.max_seconds)) + " s)"});
    }
    for (auto& [l, why] : revoke)
      finish(*l, LeaseState::Revoked, why, why.rfind("its client", 0) == 0 ? "client gone" : "max-seconds");
    if (any_granted) arm_watchdog();
  });
}

std::vector<const Lease*> LeaseBook::active() const {
  std::vector<const Lease*> out;
  for (const auto& [id, l] : leases_) out.push_back(l.get());
  return out;
}

const Lease* LeaseBook::find(const std::string& id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : it->second.get();
}

std::size_t LeaseBook::granted_count() const {
  std::size_t n = 0;
  for (const auto& [id, l] : leases_) n += l->state == LeaseState::Granted;
  return n;
}

}  // namespace pto
