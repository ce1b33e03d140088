#include "store/retention.h"

#include <chrono>

#include "store/run_history.h"

namespace pto {

Retention::Retention(boost::asio::io_context& io, RunHistory& history, const RunnerConfig& cfg,
                     std::function<bool(const std::string&)> in_use, std::function<bool()> paused, std::function<void()> changed)
    : history_(history),
      cfg_(cfg),
      in_use_(std::move(in_use)),
      paused_(std::move(paused)),
      changed_(std::move(changed)),
      timer_(io) {}

void Retention::prune(bool at_start) {
  history_.prune(cfg_.retention, cfg_.tests.retention_days, cfg_.source.keep_worktrees, at_start, in_use_);
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
