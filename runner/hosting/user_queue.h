#pragma once
// Runs waiting for a sandbox user (SPEC "A step cannot touch the daemon, the host or another run"): a run is
// lent a user of its own when it begins; when every user is lent (to other runs, or to a foreground `run` on
// the same host) it waits here, in order, and begins when a user is given back or at the next retry (every
// 5 s: a foreground run's users come back without telling the daemon).
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "hosting/hosted_run.h"

namespace pto {

class SandboxPool;

class UserQueue {
 public:
  using FindRun = std::function<HostedRun*(const std::string& id)>;
  /// `begun`: a run has its user and its tree (the daemon keeps its hand-over); `changed`: what waits changed.
  UserQueue(boost::asio::io_context& io, SandboxPool& pool, FindRun find, std::function<void(HostedRun&)> begun,
            std::function<void()> changed);

  /// Begins `run` now, or queues it behind the others when no user is free.
  void begin(HostedRun& run);
  /// A user came back (or the retry is due): the queued runs begin in order until one finds none free.
  void retry();
  /// The daemon stops: no more retries.
  void stop();
  std::vector<std::string> waiting() const { return {ids_.begin(), ids_.end()}; }

 private:
  boost::asio::io_context& io_;
  SandboxPool& pool_;
  FindRun find_;
  std::function<void(HostedRun&)> begun_;
  std::function<void()> changed_;
  std::deque<std::string> ids_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
};

}  // namespace pto
