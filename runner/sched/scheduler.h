#pragma once
// Scheduler: pure policy deciding which waiting step gets which cards next, and why the others wait.
//
// No clock, no locks, no processes: the engine hands it a snapshot (cards, groups, the queue in order) and
// applies the decision. Policy:
//   * gang allocation: a request gets all N cards at once, all from one group when groups exist, all of
//     the card type it asks for (a request never sees a card of another type);
//   * tightest fit: among groups that can serve it now, the one left with the fewest free cards, so whole
//     groups stay free for multi-card steps;
//   * the queue's order as given (sched/queue_order: priority, then fair share between runs, then submit
//     order), with reservations (conservative backfill): a request that cannot start reserves the cards
//     it will get (free ones and the busy ones expected to free first, in the group closest to satisfying
//     it). Later requests may start on cards nobody ahead of them reserved; on reserved free cards only when
//     they are expected to finish before the reservation's busy cards free up (its shadow time, as in
//     Slurm's backfill). A reservation with a busy card of unknown or overrun end allows no backfill at all,
//     so a 2-card step is never starved by a stream of 1-card steps: wrong estimates stop backfilling.
//   * CPUs and memory (SchedHost, runner.yml `host:`) are granted with the cards, all at once: a request
//     starts only when its cards and its `cpus:`/`memory:` are there. A blocked request reserves its CPUs and
//     memory as it reserves cards: later requests may use reserved CPUs only when expected to end before
//     enough of them free up (the same shadow-time rule), so a 2-card step asking CPUs is not starved by a
//     stream of CPU-only steps. A request with no cards (`devices: 0`) asking CPUs waits for CPUs alone.
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pto {

struct SchedCard {
  int id = 0;
  bool usable = true;  // false: drained
  bool free = true;    // usable and neither held by a step nor locked by another process
  std::string holder;  // who holds it when busy, for waiting reasons
  /// When the holder is expected to finish (seconds on the engine's clock); unknown = infinity.
  double busy_until = std::numeric_limits<double>::infinity();
  std::string type;  // "" untyped
};

struct SchedRequest {
  std::uint64_t id = 0;
  int devices = 1;
  std::string_view label;  // must outlive the schedule() call
  /// Expected run time in seconds; 0 = unknown (such a step never backfills onto reserved cards).
  double expected_seconds = 0;
  /// Only cards of this type ("" = any card).
  std::string_view type;
  /// Only these cards (a lease for named cards, `task-submit --device 2,3`); null = any.
  const std::vector<int>* only = nullptr;
  /// Whose it is (a run's id) and that run's priority: what the queue's order is made of (sched/queue_order).
  /// schedule() itself takes the queue in the order it is given.
  std::string_view share;
  int priority = 0;
  /// Never these cards (a retry elsewhere); null = none.
  const std::vector<int>* avoid = nullptr;
  /// CPUs and bytes of memory it uses beside its cards (0: none asked; not counted against SchedHost).
  int cpus = 0;
  std::uint64_t memory = 0;
};

/// The host's CPUs and memory beside its cards: the budget, and what running holders use until when.
struct SchedHost {
  int cpus = 0;              // the budget; 0: CPUs are not scheduled
  std::uint64_t memory = 0;  // bytes; 0: memory is not scheduled
  struct Use {
    int cpus = 0;
    std::uint64_t memory = 0;
    double busy_until = std::numeric_limits<double>::infinity();  // unknown = infinity, as SchedCard's
  };
  std::vector<Use> in_use;
  bool scheduled() const { return cpus > 0 || memory > 0; }
};

struct SchedAssignment {
  std::uint64_t request = 0;
  std::vector<int> cards;  // ascending
};

struct ScheduleResult {
  std::vector<SchedAssignment> start;
  std::map<std::uint64_t, std::string> waiting_reason;
  std::map<int, std::uint64_t> reserved;  // card -> request holding the reservation
  std::vector<std::uint64_t> impossible;  // requests no group can ever serve with the usable cards
  /// Requests after this many were not examined: no card was left free, so none of them could start. Their
  /// reason is "waiting: every card is busy or reserved". (Keeps a pass O(cards), not O(queue), when full.)
  std::size_t examined = 0;
};

/// `groups` may be empty (every card may serve with any other). Cards not in any group serve 1-card requests.
/// `now` is on the same clock as SchedCard::busy_until. `explain` false: no waiting reasons (the same
/// decisions, for the start forecast, which plays thousands of passes).
/// `host` null: CPUs and memory are not scheduled (a request with no cards then starts at once).
ScheduleResult schedule(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups,
                        const std::vector<SchedRequest>& queue_in_order, double now = 0, bool explain = true,
                        const SchedHost* host = nullptr);

}  // namespace pto
