#pragma once
// Retention (docs/operators.md, "Retention"): what the run history keeps is pruned at start, after each run,
// and hourly, so that `retention.max-age-days` holds on an idle host too. The pruning itself is the history's
// (RunHistory::prune); this is when, with which settings, and never of a run still hosted. The named caches are
// pruned at the same times, on a worker thread (caches/cache_prune), their sizes then in the metrics.
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "config/runner_config.h"

namespace pto {

class RunHistory;
class PerfHistory;
class StepResults;
struct Metrics;

class Retention {
 public:
  /// `cfg`: the settings as the last reload left them. `in_use(id)`: run `id` is hosted or being made (its
  /// folder stays). `paused()`: no hourly pruning (the daemon is cancelling). `changed`: the history shrank.
  /// `work`: where the caches are walked; `metrics`: their sizes, set on the engine's thread.
  Retention(boost::asio::io_context& io, RunHistory& history, const RunnerConfig& cfg, std::function<bool(const std::string&)> in_use,
            std::function<bool()> paused, std::function<void()> changed, boost::asio::thread_pool& work, Metrics& metrics,
            StepResults* results = nullptr, PerfHistory* perf = nullptr);
  void prune(bool at_start);
  /// Hourly from now on, until stop().
  void start();
  void stop() { timer_.cancel(); }

 private:
  RunHistory& history_;
  const RunnerConfig& cfg_;
  std::function<bool(const std::string&)> in_use_;
  std::function<bool()> paused_;
  std::function<void()> changed_;
  boost::asio::steady_timer timer_;
  boost::asio::io_context& io_;
  boost::asio::thread_pool& work_;
  Metrics& metrics_;
  StepResults* results_;  // reusable results past reuse.max-age-days go too
  PerfHistory* perf_;     // a pull request's perf rows go with its run; a branch's stay (its history)
  bool caches_pruning_ = false;  // one walk at a time
  void prune_caches();
};

}  // namespace pto
