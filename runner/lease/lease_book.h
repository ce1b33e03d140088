#pragma once
// LeaseBook: cards lent to tools that run work themselves (pypto's harness calls `task-submit` per batch of
// test cases), through the same queue as steps, so one host has one queue.
//
// A lease asks the dispatcher for N cards (or named ones, of a type) like a step does: same ordering, groups,
// reservations and waiting reasons. Once granted, its client runs the command and heartbeats; a lease is
// revoked when its client stops heartbeating (killed, lost), when it passes max-seconds, when its run ends or
// is cancelled, or on request. Revoking kills every process carrying the lease's marker (the client exports it
// into the command's environment; process_sweep finds escapees) and then frees the cards.
//
// Everything runs on the daemon's io_context thread, like the engine.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/card_broker.h"
#include "exec/process_marker.h"
#include "lease/lease.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class LeaseBook {
 public:
  /// Called once: with the lease when granted, or with an HTTP status and why when it never will be (409: no
  /// card can ever serve it; 504: not within wait_seconds; 410: revoked while waiting).
  using Granted = std::function<void(const Lease&)>;
  using Refused = std::function<void(int status, const std::string& why)>;

  LeaseBook(boost::asio::io_context& io, CardBroker& broker, double heartbeat_timeout_seconds, double kill_grace_seconds);
  ~LeaseBook();

  std::string create(LeaseRequest req, Granted granted, Refused refused);
  /// False when there is no such active lease (revoked or never was): the client must stop its command.
  bool heartbeat(const std::string& id);
  /// Ends a lease. Its own client releasing it (`by_client`) has stopped its command and its process group
  /// itself, so the cards go at once when its cgroup is empty; otherwise whatever carries its marker or is in
  /// its cgroup is killed first. `done` runs once its cards are free, that is once every process of it is
  /// gone (or, one that outlived SIGKILL for 5 s, reported as the host's problem). False when there is no
  /// such active lease (`done` is then not called).
  bool end(const std::string& id, const std::string& why, bool by_client, std::function<void()> done = {}, LeaseReport report = {});
  /// Ends every lease of a run (it finished or was cancelled).
  void end_run(const std::string& run_id, const std::string& why);
  /// Revokes the leases one step of a run asked for: a lease never outlives its step.
  void end_step(const std::string& run_id, const StepId& step, const std::string& why);
  /// Cards held or asked for by `run_id`'s leases (for max-cards-per-run).
  int cards_of_run(const std::string& run_id) const;
  /// Ends every lease (the daemon is cancelling everything): their commands are killed, their cards freed.
  void end_all(const std::string& why);
  /// A granted lease an earlier daemon lent (its cards' flocks and its command outlived it under the step
  /// supervisor): granted again in this book, its heartbeat clock started now, its max-seconds counted from
  /// its grant (`held_seconds` ago). Its cards must already be held (the caller adopted them).
  void restore(Lease lease, double held_seconds);
  /// Where a granted lease's cgroup is made (default: this process's tree; a daemon with a step supervisor
  /// makes it in the supervisor's, so that the command in it outlives the daemon: hosting/host_leases.cpp).
  void set_cgroup_maker(std::function<std::string(const std::string& lease)> f) { make_cgroup_ = std::move(f); }
  /// SIGHUP: a new kill grace for revocations from now on.
  void set_kill_grace(double seconds) { kill_grace_ = seconds; }

  std::vector<const Lease*> active() const;
  const Lease* find(const std::string& id) const;
  std::size_t granted_count() const;
  /// Finished leases by how they ended (released, revoked: heartbeat, max-seconds, run ended...), for /metrics.
  const std::map<std::string, long long>& ended_by_reason() const { return ended_by_reason_; }
  /// Called after every change (grant, end), for the status cache.
  void set_on_change(std::function<void()> f) { on_change_ = std::move(f); }
  /// Called when a granted lease ends: how (the ended_by_reason key) and how long it held its cards.
  void set_on_ended(std::function<void(const std::string& how, double held_seconds)> f) { on_ended_ = std::move(f); }
  /// Called with a granted lease's marker when it ends, however (executor: slurm ends its Slurm job).
  void set_on_granted_end(std::function<void(const Lease&)> f) { on_granted_end_ = std::move(f); }

  double heartbeat_timeout() const { return heartbeat_timeout_; }

 private:
  struct Timers;
  void finish(Lease& l, LeaseState state, const std::string& why, const std::string& reason_key, std::function<void()> done = {});
  void arm_watchdog();
  /// The lease's cards are free: tell whoever waits for its end.
  void ended(const std::string& id);

  boost::asio::io_context& io_;
  CardBroker& broker_;
  double heartbeat_timeout_, kill_grace_;
  std::map<std::string, std::unique_ptr<Lease>> leases_;  // waiting and granted
  std::map<std::string, Refused> refused_;                 // waiting leases' answer on failure
  std::map<std::string, std::vector<std::function<void()>>> waiting_for_end_;  // ends asked for, not over yet
  std::map<std::string, long long> ended_by_reason_;
  std::function<void(const std::string&, double)> on_ended_;
  std::unique_ptr<Timers> timers_;
  std::function<void()> on_change_;
  std::function<void(const Lease&)> on_granted_end_;
  std::function<std::string(const std::string&)> make_cgroup_;
};

}  // namespace pto
