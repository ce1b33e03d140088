#pragma once
// The policies pto-runner's scheduler is measured against (bench_schedule, and the starvation test), kept out
// of the production scheduler (sched/scheduler): each is the production tightest-fit placement applied one
// request at a time, without reservations.
//   Fifo            first in, first out: nothing passes a request that cannot start
//   GreedyBackfill  anything that fits starts (a multi-card request can starve behind a stream of small ones)
// ReserveAndBackfill is sched/scheduler's schedule() itself.
#include <vector>

#include "sched/scheduler.h"

namespace pto::bench {

enum class SchedPolicy { ReserveAndBackfill, Fifo, GreedyBackfill };

ScheduleResult schedule_with_policy(SchedPolicy policy, const std::vector<SchedCard>& cards,
                                    const std::vector<std::vector<int>>& groups,
                                    const std::vector<SchedRequest>& queue_in_submit_order, double now = 0);

}  // namespace pto::bench
