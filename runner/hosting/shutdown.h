#pragma once
// Shutdown: how the daemon stops (docs/operators.md: SIGTERM drains, SIGINT cancels). Its one owner of the
// stopping state: whether a drain or a cancel is under way, the drain's bound (shutdown-timeout-minutes), and
// the runs that ended during a drain whose clients have not read their end yet. Once the daemon is quiet (no
// run, checkout or lease of its own is left) and every such run was read (then 2 s more for the log tails a
// `submit` fetches next; at most 30 s in all), it closes the daemon's doors and answers `done` with the exit
// code: 0 after a drain in which every run ended on its own, the signal's after a cancel.
#include <functional>
#include <memory>
#include <set>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "util/answer.h"

namespace pto {

class Shutdown {
 public:
  /// `quiet()`: nothing of the daemon's is active. `close()`: stop its timers and listeners (once, at the end).
  Shutdown(boost::asio::io_context& io, std::function<bool()> quiet, std::function<void()> close);

  bool draining() const { return draining_; }
  bool cancelling() const { return cancelling_; }
  bool stopping() const { return draining_ || cancelling_; }
  /// The 503 a submission or a lease gets meanwhile, saying which.
  Answer refusal() const;

  /// SIGTERM. False when already stopping. Past `timeout_seconds`, unless quiet by then, `expired()`.
  bool begin_drain(std::function<void(int exit_code)> done, double timeout_seconds, std::function<void()> expired);
  /// SIGINT, a second SIGTERM, a drain past its bound. False when already cancelling (a `done` given still
  /// replaces the one waiting).
  bool begin_cancel(int exit_code, std::function<void(int exit_code)> done);
  /// A run ended: during a drain its client should read its end before the daemon goes.
  void run_finished(const std::string& id);
  /// A finished run's record was served.
  void run_read(const std::string& id);
  /// Something ended: stop once quiet (on a later turn of the loop).
  void check();

 private:
  void finish(int exit_code);

  boost::asio::io_context& io_;
  std::function<bool()> quiet_;
  std::function<void()> close_;
  std::function<void(int)> done_;
  int exit_code_ = 0;
  bool draining_ = false, cancelling_ = false;
  std::set<std::string> unread_;  // runs that ended while draining, not yet read by a client
  bool lingering_ = false;        // the last of them was read: answering 2 s more before stopping
  std::unique_ptr<boost::asio::steady_timer> bound_, linger_;
};

}  // namespace pto
