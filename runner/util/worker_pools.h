#pragma once
// The daemon's blocking work, off the engine thread so no request can stall it, in two pools: reads (logs,
// run.json, a step's reports) answer in milliseconds; git (checkouts that may wait minutes for the mirror's
// lock or a fetch, worktree hand-overs and removals) must never keep a read waiting behind it.
#include <boost/asio/thread_pool.hpp>

namespace pto {

struct WorkerPools {
  boost::asio::thread_pool reads{4};
  boost::asio::thread_pool git{4};
  /// Waits for what runs: a checkout in progress finishes (it is bounded by the fetch timeout).
  void join() {
    git.join();
    reads.join();
  }
};

}  // namespace pto
