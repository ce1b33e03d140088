#pragma once
// Dispatcher: the one queue of device requests on this host, across every run, and the glue between the pure
// scheduler and the device pool's locks.
//
// A step asks for N cards and is called back with them once they are locked; it gives them back (release)
// only after its processes are gone. The order the scheduler sees is sched/queue_order's: each run's priority,
// then fair share between runs (the card-time each has used, kept in a ShareLedger here), then submit time; a
// retried step keeps its original place number so a retry does not go to the back of the line. Each waiting
// request has an expected start (sched/start_forecast), recomputed at most once a second when read.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/card_broker.h"
#include "sched/device_pool.h"
#include "sched/scheduler.h"
#include "sched/share_ledger.h"

namespace boost::asio {
class io_context;
}

namespace pto {

/// The local card broker: the host's own cards, scheduled here and locked with flocks.
class Dispatcher : public CardBroker {
 public:
  Dispatcher(boost::asio::io_context& io, DevicePool& pool);
  ~Dispatcher();

  /// Queues a request; `on_grant` gets its cards once they are locked. Returns the ticket.
  std::uint64_t request(CardRequest req, Grant on_grant, Impossible on_impossible) override;
  void withdraw(std::uint64_t ticket) override;
  void release(const std::vector<int>& cards) override;
  void release_hold(std::uint64_t ticket) override;
  std::vector<int> report_outcome(const std::vector<int>& cards, bool infra_failure, const std::string& what) override {
    return pool_.record_result(cards, infra_failure, what);
  }
  bool is_drained(int card) const override { return pool_.is_drained(card); }
  std::string charge(int card, const std::string& run, const std::string& what) override;
  std::string failing_elsewhere(int card, const std::string& run) override;
  void set_priority(const std::string& share, int priority) override;
  std::vector<int> lock_fds(const std::vector<int>& cards) const override;
  /// A running step of an adopted run holds `cards` (its supervisor kept their flocks, `fds`): held again, its
  /// card-time its run's (DevicePool::adopt).
  void adopt(const std::vector<int>& cards, const std::vector<int>& fds, const std::string& label, const std::string& share);
  void forget(const std::string& share) override;
  void relabel(int card, const std::string& label) override { pool_.relabel(card, label); }

  /// The waiting steps in order with their reasons, and the reservations (both brought up to date first).
  std::vector<QueueEntry> queue() override;
  const std::map<int, std::uint64_t>& reserved();
  DevicePool& pool() { return pool_; }
  /// Schedules now (the engine calls this after undrain, for example).
  void poke();
  /// The daemon's choice: a request only drained cards could serve waits for them to return (true) instead of
  /// failing at once as in a foreground `run` (false, the default).
  void set_wait_for_drained(bool wait) { wait_for_drained_ = wait; }
  /// The daemon's choice: cards another program uses are re-checked even while nothing waits, so the status
  /// shows them free as soon as they are (false, the default: `run` must be able to finish).
  /// Also, every second, every card it does not hold is looked at for another program's flock (/proc/locks,
  /// the lock never touched), and every fifth second for a process outside with its files open: the status
  /// names every card held outside at any time, not only once a step tried it (DevicePool::watch_outside).
  void set_watch_outside_when_idle(bool watch);
  /// The host's CPUs and memory to hand out beside the cards (runner.yml host:, else the machine's); a budget
  /// of 0 CPUs and 0 bytes schedules neither (the default until set).
  void set_host_budget(int cpus, std::uint64_t memory);
  /// CPUs and memory: the budget, and what granted requests hold now (the status, the metrics).
  struct HostUse {
    int cpus = 0, cpus_in_use = 0;
    std::uint64_t memory = 0, memory_in_use = 0;
  };
  HostUse host_use() const;
  /// Called after each scheduling pass (the queue, its reasons or the reservations may have changed).
  void set_on_change(std::function<void()> f) { on_change_ = std::move(f); }

 private:
  struct Pending;
  void pump();
  void schedule_pump();
  ScheduleResult schedule_pending(double now);
  /// The waiting requests in submit order, as the scheduler takes them.
  /// The queue in submit order, its first `limit` entries.
  std::vector<SchedRequest> submit_order(std::size_t limit = static_cast<std::size_t>(-1)) const;
  /// Takes a request out of pending_ (and out of the count of its share).
  void drop_pending(std::map<std::uint64_t, std::shared_ptr<Pending>>::iterator it);
  void refresh_forecast(double now);
  void refresh_reasons();
  std::string reason_at(const Pending& p, std::size_t position) const;
  bool servable_once_undrained(const Pending& p) const;

  boost::asio::io_context& io_;
  DevicePool& pool_;
  std::map<std::uint64_t, std::shared_ptr<Pending>> pending_;  // by order, hence submit time
  std::map<std::string, int> pending_shares_;  // how many of pending_ each share (run) has
  static constexpr std::size_t kOneRunHead = 128;  // as sched/queue_order's schedule_queue looks first
  std::map<std::uint64_t, std::uint64_t> order_of_ticket_;
  std::map<int, std::uint64_t> reserved_;
  SchedHost host_;  // the budget; in_use rebuilt from held_ at each pass
  std::map<std::uint64_t, SchedHost::Use> held_;  // ticket -> the CPUs and memory a granted request holds
  SchedHost host_snapshot() const;
  ShareLedger ledger_;                    // card-time used by each run (fair share)
  std::map<std::string, int> priority_;  // of each run
  std::map<std::uint64_t, double> forecast_;  // order -> expected start (steady seconds)
  double forecast_at_ = -1;
  std::size_t unexamined_from_ = 0;  // queue positions the last pass did not reach
  std::uint64_t next_ticket_ = 0;
  bool pump_posted_ = false;
  bool reasons_stale_ = false;
  bool wait_for_drained_ = false;
  bool watch_outside_when_idle_ = false;
  std::function<void()> on_change_;
  void watch_outside();
  struct Poller;
  std::unique_ptr<Poller> poller_;  // re-checks cards locked by other processes, and watches the others
};

}  // namespace pto
