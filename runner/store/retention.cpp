#include "store/retention.h"

#include <chrono>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "caches/cache_prune.h"
#include "read_model/counters.h"
#include "store/run_history.h"
#include "store/perf_history.h"
#include "store/step_results.h"
#include "util/clock.h"

namespace pto {

Retention::Retention(boost::asio::io_context& io, RunHistory& history, const RunnerConfig& cfg,
                     std::function<bool(const std::string&)> in_use, std::function<bool()> paused, std::function<void()> changed,
                     boost::asio::thread_pool& work, Metrics& metrics, StepResults* results, PerfHistory* perf)
    : history_(history),
      cfg_(cfg),
      in_use_(std::move(in_use)),
      paused_(std::move(paused)),
      changed_(std::move(changed)),
      timer_(io),
      io_(io),
      work_(work),
      metrics_(metrics),
      results_(results),
      perf_(perf) {}

void Retention::prune_caches() {
  std::error_code ec;
  if (caches_pruning_ || !std::filesystem::is_directory(cfg_.caches.dir, ec)) return;
  caches_pruning_ = true;
  boost::asio::post(work_, [this, caches = cfg_.caches] {
    std::vector<std::string> removed;
    auto usage = pto::prune_caches(caches, epoch_now(), removed);
    boost::asio::post(io_, [this, usage = std::move(usage), removed = std::move(removed)] {
      caches_pruning_ = false;
      for (const std::string& r : removed) spdlog::info("caches: removed {}", r);
      metrics_.cache_bytes.clear();
      for (const auto& [name, u] : usage) metrics_.cache_bytes[name] = u.bytes;
      changed_();
    });
  });
}

void Retention::prune(bool at_start) {
  history_.prune(cfg_.retention, cfg_.tests.retention_days, cfg_.source.keep_worktrees, at_start, in_use_);
  prune_caches();
  if (results_) results_->prune(epoch_now() - cfg_.reuse_max_age_days * 86400);
  if (perf_) perf_->prune();
  changed_();
}

void Retention::start() {
  timer_.expires_after(std::chrono::hours(1));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || paused_()) return;
    prune(false);
    start();
  });
}

}  // namespace pto
