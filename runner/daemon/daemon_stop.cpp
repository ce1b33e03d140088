// Stopping the daemon (docs/operators.md): SIGTERM drains (accepted runs go on to their end,
// their clients read the end), SIGINT or a second SIGTERM cancels everything, SIGUSR2 hands over.
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include "daemon/daemon.h"

namespace pto {

void Daemon::drain(std::function<void(int)> done) {
  if (stop_.stopping()) return;
  const double minutes = cfg_.shutdown_timeout_minutes;
  spdlog::warn("SIGTERM: draining: {} active run(s) go on to their end (at most {} min, shutdown-timeout-minutes); "
               "no new runs or leases; SIGTERM again or SIGINT cancels them",
               runs_->size(), minutes);
  stop_.begin_drain(std::move(done), minutes * 60, [this] {
    spdlog::warn("shutdown-timeout-minutes passed with {} run(s) still active: cancelling them", runs_->size());
    cancel_all(143, nullptr);
  });
  view_changed();
}

void Daemon::cancel_all(int exit_code, std::function<void(int)> done) {
  if (!stop_.begin_cancel(exit_code, std::move(done))) return;
  view_changed();
  if (!quiet()) {
    spdlog::warn("cancelling {} active run(s) and {} lease(s)", view_.model.active.size(), runs_->leases().book.active().size());
    runs_->cancel_all(SIGTERM);
    runs_->leases().book.end_all("the daemon is shutting down");
  }
  stop_.check();
}

bool Daemon::quiet() const { return !runs_ || runs_->quiet(); }

void Daemon::hand_over() {
  if (store_ && store_->opened()) store_->history().flush();
}

void Daemon::close() {
  if (store_ && store_->opened()) store_->retention().stop();
  if (runs_) runs_->stop();
  view_.stop();
  // Stopping for good (not a hand-over): the supervisor's copies of the listeners go too, so the address is free.
  if (host_ && host_->supervised) host_->supervised->forget_listeners();
  if (endpoints_) endpoints_->stop();
}

void Daemon::run_read(const std::string& id) { stop_.run_read(id); }

}  // namespace pto
