#pragma once
// The start forecast: when each waiting request is expected to start (`eta`), by running the real policy
// (sched/queue_order + sched/scheduler) forward on a virtual clock from the host's present: the cards as they
// are, each busy card freeing at its holder's expected end, each waiting request taking what the scheduler
// would give it and holding it for its expected duration (learned, store/learned_durations). Pure: the
// dispatcher calls it with a snapshot; the tests and bench_schedule call it on a simulated day.
//
// What it cannot know, and so assumes: a holder or request with no estimate takes kUnknownStepSeconds; a
// holder past its estimate ends kOverrunSeconds from now; work not yet queued (steps whose `needs` are still
// running, runs not yet submitted) does not exist. Requests no usable card can serve get no forecast.
#include <cstdint>
#include <map>
#include <vector>

#include "sched/scheduler.h"
#include "sched/share_ledger.h"

namespace pto {

constexpr double kOverrunSeconds = 60;

/// request id -> expected start, on the clock of `now` and SchedCard::busy_until. `ledger` is the host's (a
/// copy is played forward), and so is `host` (CPUs and memory, when scheduled). At most `max_events` scheduling passes (past them, the rest get no forecast).
std::map<std::uint64_t, double> forecast_starts(const std::vector<SchedCard>& cards, const std::vector<std::vector<int>>& groups,
                                                const std::vector<SchedRequest>& queue_in_submit_order, ShareLedger ledger,
                                                double now, std::size_t max_events = 100000, const SchedHost* host = nullptr);

}  // namespace pto
