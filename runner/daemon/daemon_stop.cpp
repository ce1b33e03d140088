// Stopping the daemon (docs/operators.md): SIGTERM drains (accepted runs go on to their end,
// their clients read the end), SIGINT or a second SIGTERM cancels everything; and retention, which runs at
// start, after each run and hourly.
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include "daemon/daemon.h"

namespace pto {

void Daemon::prune(bool at_start) {
  history_->prune(cfg_.retention, cfg_.source.keep_worktrees, at_start,
                  [this](const std::string& id) { return runs_.count(id) > 0 || preparing_.count(id) > 0; });
  view_changed();
}

void Daemon::arm_retention_timer() {
  // Besides at start and after each run: hourly, so max-age-days holds on an idle host too.
  if (!retention_timer_) retention_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  retention_timer_->expires_after(std::chrono::hours(1));
  retention_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || cancelling_) return;
    prune(false);
    arm_retention_timer();
  });
}

Answer Daemon::stopping_refusal() const {
  return Answer::error(Outcome::Unavailable,
                       draining_ ? "the daemon is draining (SIGTERM): runs already accepted go on to their end, "
                                   "no new runs or leases are accepted; submit to the host that replaces it"
                                 : "the daemon is stopping (SIGINT): its runs are being cancelled");
}

void Daemon::drain(std::function<void(int)> done) {
  if (draining_ || cancelling_) return;
  draining_ = true;
  on_stopped_ = std::move(done);
  view_changed();
  const double minutes = cfg_.shutdown_timeout_minutes;
  spdlog::warn("SIGTERM: draining: {} active run(s) go on to their end (at most {} min, shutdown-timeout-minutes); "
               "no new runs or leases; SIGTERM again or SIGINT cancels them",
               runs_.size(), minutes);
  if (quiet()) return finish_shutdown(0);
  shutdown_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  shutdown_timer_->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(minutes * 60)));
  shutdown_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec || quiet()) return;
    spdlog::warn("shutdown-timeout-minutes passed with {} run(s) still active: cancelling them", runs_.size());
    cancel_all(143, std::move(on_stopped_));
  });
}

void Daemon::cancel_all(int exit_code, std::function<void(int)> done) {
  if (done) on_stopped_ = std::move(done);
  if (cancelling_) return;
  cancelling_ = true;
  stop_exit_ = exit_code;
  if (shutdown_timer_) shutdown_timer_->cancel();
  view_changed();
  if (quiet()) return finish_shutdown(exit_code);
  spdlog::warn("cancelling {} active run(s) and {} lease(s)", model_.active.size(), leases_->active().size());
  for (auto& [id, run] : runs_)
    if (!run->engine().finished()) run->cancel(SIGTERM);
  leases_->end_all("the daemon is shutting down");
  check_stopped();
}

bool Daemon::quiet() const {
  // Nothing of ours runs: no run, no submission being checked out, no lease holding cards (an operator's
  // lease's command would otherwise outlive the daemon's flock on its card).
  // A finished run stays until it is given back (its tree returned to root, its user to the pool).
  return runs_.empty() && preparing_.empty() && leases_->granted_count() == 0 && leases_->active().empty();
}

void Daemon::check_stopped() {
  if ((draining_ || cancelling_) && quiet()) boost::asio::post(io_, [this] { finish_shutdown(cancelling_ ? stop_exit_ : 0); });
}

void Daemon::finish_shutdown(int exit_code) {
  if (!on_stopped_) return;
  if (cancelling_) {  // SIGINT, a second SIGTERM: stop now
    unread_finished_.clear();
    lingering_ = false;
  }
  // Draining, clients following a run that ended meanwhile read it once more; wait for that (at most 30 s),
  // so a `submit` sees the end of its run rather than a lost server.
  if (!unread_finished_.empty() && !linger_timer_) {
    linger_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    linger_timer_->expires_after(std::chrono::seconds(30));
    linger_timer_->async_wait([this, exit_code](boost::system::error_code ec) {
      if (ec) return;
      unread_finished_.clear();
      finish_shutdown(exit_code);
    });
    return;
  }
  // A client read the last of them moments ago: its answer (and the log tails it fetches next) are still
  // on their way; the 2 s timer of run_read calls back here.
  if (!unread_finished_.empty() || lingering_) return;
  if (linger_timer_) linger_timer_->cancel();
  if (retention_timer_) retention_timer_->cancel();
  if (waiting_timer_) waiting_timer_->cancel();
  if (refresh_) refresh_->stop();
  if (server_) server_->stop();
  if (steps_server_) steps_server_->stop();
  boost::asio::post(io_, [done = std::exchange(on_stopped_, nullptr), exit_code] { done(exit_code); });
}

void Daemon::run_read(const std::string& id) {
  if (!unread_finished_.erase(id) || !unread_finished_.empty()) return;
  // The answer being read is still on its way, and a `submit` goes on to fetch failed steps' log tails:
  // keep answering for 2 s more, then stop once quiet (a run read may still be being given back).
  lingering_ = true;
  if (!linger_timer_) linger_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  linger_timer_->expires_after(std::chrono::seconds(2));
  linger_timer_->async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    lingering_ = false;
    check_stopped();
  });
}

}  // namespace pto
