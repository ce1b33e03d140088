#pragma once
// CardBroker: what a run (RunEngine) and the lease book need from whoever hands out NPU cards. They ask for N
// cards of a type for a holder, hear of the grant (or that none can ever serve it), give the cards back,
// report how a step ended on them (health: a card with repeated infrastructure failures is drained), and
// read waiting reasons. The local broker is the Dispatcher (host/dispatcher: the host's one queue, the
// pure scheduler, the device pool's flocks); tests drive the engine with a fake one (tests/engine_test.cpp).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pto {

/// What a step (or a lease) asks the host for.
struct CardRequest {
  int devices = 1;
  std::string type;             // "" = any card
  std::string label;            // who asks, for holders and waiting reasons
  double expected_seconds = 0;  // 0: unknown (never backfills ahead of a reservation)
  std::uint64_t order = 0;      // an earlier place in line to keep (a retry); 0: a new place
  std::vector<int> only;        // exactly these cards (then devices == only.size()); empty: any
  std::string share;            // whose card-time it is: the run's id (fair share between runs, its priority)
  std::vector<int> avoid;       // never these cards (a retry elsewhere: the cards its failure was charged to)
  /// CPUs and bytes of memory it uses beside the cards (`cpus:`, `memory:`; 0: none asked). Granted with
  /// the cards; given back with release_hold(ticket). `devices` 0 with either: a request for those alone.
  int cpus = 0;
  std::uint64_t memory = 0;
  /// With no `order`: its client has asked since then (µs since the epoch; a task-submit asking again after
  /// its daemon went away), so its new place is by that time, ahead of what was asked later.
  std::uint64_t since_us = 0;
};

/// A waiting request, for the status: its ticket, who, how many cards, why it waits, since when.
struct QueueEntry {
  std::uint64_t ticket = 0;
  std::string label;
  int devices = 0;
  int cpus = 0;
  std::uint64_t memory = 0;
  std::string reason;
  double waited_seconds = 0;
  std::string since;
  std::string marker;  // a step the executor placed (Slurm): its launch marker "RUN/JOB/STEP/ATTEMPT"
  std::string cluster_reason;  // Slurm's own word for why it waits ("Resources"), for /metrics
  // Its place, as `sprio` explains one (sched/queue_order): its run's priority, the card-time its run has used,
  // and its tag (that plus its run's earlier waiting requests' expected card-time).
  std::string share;
  int priority = 0;
  double run_used_card_seconds = 0;
  double tag = 0;
  /// When it is expected to start, in seconds from now (sched/start_forecast); < 0: no forecast.
  double eta_seconds = -1;
};

class CardBroker {
 public:
  using Grant = std::function<void(const std::vector<int>& cards)>;
  using Impossible = std::function<void(const std::string& why)>;
  virtual ~CardBroker() = default;

  /// Queues a request; `on_grant` gets its cards once they are the holder's. Returns the ticket.
  virtual std::uint64_t request(CardRequest req, Grant on_grant, Impossible on_impossible) = 0;
  /// Takes a waiting request out of the queue (cancelled, timed out).
  virtual void withdraw(std::uint64_t ticket) = 0;
  /// Gives cards back, once every process that used them is gone.
  virtual void release(const std::vector<int>& cards) = 0;
  /// Gives back the CPUs and memory granted to request `ticket` (before its cards: release() schedules at
  /// once). Nothing for a request that asked none, or a broker that does not schedule them.
  virtual void release_hold(std::uint64_t ticket) { (void)ticket; }
  /// How a step ended on its cards (`infra_failure`: the card's fault, by the health settings). Returns the
  /// cards this drained.
  virtual std::vector<int> report_outcome(const std::vector<int>& cards, bool infra_failure, const std::string& what) = 0;
  virtual bool is_drained(int card) const = 0;
  /// A failure of run `run` charged to `card` (cause card or infra; `what` its pattern or reason): the card's
  /// health note for the verdict (sched/device_pool). Brokers without card health (Slurm's) say nothing.
  virtual std::string charge(int card, const std::string& run, const std::string& what) { (void)card, (void)run, (void)what; return ""; }
  /// What `card` did to other runs' work lately ("" nothing): a plain failure on it is then the card's.
  virtual std::string failing_elsewhere(int card, const std::string& run) { (void)card, (void)run; return ""; }
  /// Says who holds a card now (a health check after the step that held it); the card stays held.
  virtual void relabel(int card, const std::string& label) = 0;
  /// The waiting requests in order, with their reasons.
  virtual std::vector<QueueEntry> queue() = 0;
  /// A run's priority (runner.yml `priorities` by its ref), for every request it makes from now on; when the
  /// run ends, `forget` drops it and its card-time. Brokers that do not order runs (Slurm's) ignore both.
  virtual void set_priority(const std::string& share, int priority) { (void)share, (void)priority; }
  /// The descriptors of the flocks that hold `cards` for their step (a supervisor keeps them open past the
  /// daemon: the cards stay the step's); none where the cards are not flocks of this process (Slurm).
  virtual std::vector<int> lock_fds(const std::vector<int>& cards) const { (void)cards; return {}; }
  virtual void forget(const std::string& share) { (void)share; }
};

}  // namespace pto
