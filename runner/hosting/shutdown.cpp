#include "hosting/shutdown.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace pto {

Shutdown::Shutdown(boost::asio::io_context& io, std::function<bool()> quiet, std::function<void()> close)
    : io_(io), quiet_(std::move(quiet)), close_(std::move(close)) {}

Answer Shutdown::refusal() const {
  return Answer::error(Outcome::Unavailable,
                       draining_ ? "the daemon is draining (SIGTERM): runs already accepted go on to their end, "
                                   "no new runs or leases are accepted; submit to the host that replaces it"
                                 : "the daemon is stopping (SIGINT): its runs are being cancelled");
}

bool Shutdown::begin_drain(std::function<void(int)> done, double timeout_seconds, std::function<void()> expired) {
  if (stopping()) return false;
  draining_ = true;
  done_ = std::move(done);
  if (quiet_()) {
    finish(0);
    return true;
  }
  bound_ = std::make_unique<boost::asio::steady_timer>(io_);
  bound_->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_seconds)));
  bound_->async_wait([this, expired = std::move(expired)](boost::system::error_code ec) {
    if (ec || quiet_()) return;
    expired();
  });
  return true;
}

bool Shutdown::begin_cancel(int exit_code, std::function<void(int)> done) {
  if (done) done_ = std::move(done);
  if (cancelling_) return false;
  cancelling_ = true;
  exit_code_ = exit_code;
  if (bound_) bound_->cancel();
  return true;
}

void Shutdown::run_finished(const std::string& id) {
  if (draining_ && !cancelling_) unread_.insert(id);
}

void Shutdown::run_read(const std::string& id) {
  if (!unread_.erase(id) || !unread_.empty()) return;
  // The answer being read is still on its way, and a `submit` goes on to fetch failed steps' log tails:
  // keep answering for 2 s more, then stop once quiet (a run read may still be being given back).
  lingering_ = true;
  if (!linger_) linger_ = std::make_unique<boost::asio::steady_timer>(io_);
  linger_->expires_after(std::chrono::seconds(2));
  linger_->async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    lingering_ = false;
    check();
  });
}

void Shutdown::check() {
  if (stopping() && quiet_()) boost::asio::post(io_, [this] { finish(cancelling_ ? exit_code_ : 0); });
}

void Shutdown::finish(int exit_code) {
  if (!done_) return;
  if (cancelling_) {  // SIGINT, a second SIGTERM: stop now
    unread_.clear();
    lingering_ = false;
  }
  // Draining, clients following a run that ended meanwhile read it once more; wait for that (at most 30 s),
  // so a `submit` sees the end of its run rather than a lost server.
  if (!unread_.empty() && !linger_) {
    linger_ = std::make_unique<boost::asio::steady_timer>(io_);
    linger_->expires_after(std::chrono::seconds(30));
    linger_->async_wait([this, exit_code](boost::system::error_code ec) {
      if (ec) return;
      unread_.clear();
      finish(exit_code);
    });
    return;
  }
  // A client read the last of them moments ago: its answer (and the log tails it fetches next) are still
  // on their way; run_read's 2 s timer checks again.
  if (!unread_.empty() || lingering_) return;
  if (linger_) linger_->cancel();
  close_();
  boost::asio::post(io_, [done = std::exchange(done_, nullptr), exit_code] { done(exit_code); });
}

}  // namespace pto
