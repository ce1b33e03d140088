#include "hosting/user_queue.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "sandbox/sandbox_pool.h"

namespace pto {

UserQueue::UserQueue(boost::asio::io_context& io, SandboxPool& pool, FindRun find, std::function<void(HostedRun&)> begun,
                     std::function<void()> changed)
    : io_(io), pool_(pool), find_(std::move(find)), begun_(std::move(begun)), changed_(std::move(changed)) {}

void UserQueue::begin(HostedRun& run) {
  if (run.begin()) return begun_(run);
  ids_.push_back(run.id());
  spdlog::info("run {} waits: no free sandbox user ({} lent)", run.id(), pool_.size());
}

void UserQueue::retry() {
  // In order, until one finds no user (a foreground run may hold some): the rest wait for the next return or
  // the next retry.
  while (!ids_.empty()) {
    HostedRun* next = find_(ids_.front());
    if (!next || next->begun()) {  // gone, or cancelled meanwhile (it ended at once)
      ids_.pop_front();
      continue;
    }
    if (!pool_.lend_possible() || !next->begin()) break;
    begun_(*next);
    ids_.pop_front();
  }
  if (!ids_.empty()) {
    if (!timer_) timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    timer_->expires_after(std::chrono::seconds(5));
    timer_->async_wait([this](boost::system::error_code ec) {
      if (!ec) retry();
    });
  }
  changed_();
}

void UserQueue::stop() {
  if (timer_) timer_->cancel();
}

}  // namespace pto
