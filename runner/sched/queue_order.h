#pragma once
// The order in which the scheduler (sched/scheduler) sees the host's queue, across runs:
//   1. priority, higher first (runner.yml `priorities` by ref: the main branch and merge queues above pull
//      requests);
//   2. among equal priorities, fair share between runs, by start-time fair queueing: each waiting request's
//      tag is the card-time its run has used (sched/share_ledger) plus what its run's earlier waiting
//      requests will use; smaller tags first. A run of 4 steps submitted after one of 200 therefore
//      alternates with it instead of waiting behind all 200, and two large runs alternate with each other;
//   3. submit order (a run's own requests never overtake each other; a retry keeps its place).
// Reservations, backfill and no-starvation are the scheduler's and apply to this order as they applied to
// submit order: a 2-card step of a later run reserves as soon as it is ahead.
#include <cstddef>
#include <vector>

#include "sched/scheduler.h"
#include "sched/share_ledger.h"

namespace pto {

/// What a waiting request of unknown duration is taken to cost, per card, when its run's tag is advanced
/// (a typical pypto step takes minutes; only the relative size matters).
constexpr double kUnknownStepSeconds = 300;

/// `queue` in submit order (SchedRequest::id ascending), reordered as above; at most `limit` entries (the
/// head: the scheduler rarely reads further). With one share and one priority this is the queue itself.
/// `tags`, when given, gets each returned request's tag (its run's use so far plus its earlier waiting
/// requests' expected card-time), the part of its place `sprio` would show beside the priority.
std::vector<SchedRequest> order_queue(const std::vector<SchedRequest>& queue, const ShareLedger& ledger, double now,
                                      std::size_t limit = static_cast<std::size_t>(-1), std::vector<double>* tags = nullptr);

/// The queue ordered as above, then scheduled (sched/scheduler): what the dispatcher and the start forecast
/// both do at every pass. The scheduler first gets the head of the order only, the whole of it only when it
/// walked to the end of that head (decisions on a prefix never depend on what follows it). `ordered`, when
/// given, gets the order the scheduler read.
ScheduleResult schedule_queue(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups,
                              const std::vector<SchedRequest>& queue_in_submit_order, const ShareLedger& ledger, double now,
                              std::vector<SchedRequest>* ordered = nullptr, bool explain = true, const SchedHost* host = nullptr);

}  // namespace pto
