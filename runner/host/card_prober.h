#pragma once
// CardProber: brings bad cards back, as LAVA's health checks do. Every health.probe-interval-seconds, each bad
// card nothing holds is locked for the probe, `health.reset` runs on it first (once per bad spell: a hot reset
// while it is idle), then `health.check`; health.return-after passes in a row make it good and put it back
// in service (sched/device_pool keeps the count), a failure keeps it bad. A person's drain (maintenance) is
// never probed. The daemon runs one (with `health.check` set, on its own cards); each probe is reported for
// the cards page.
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "config/runner_config.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class DevicePool;
class Executor;

class CardProber {
 public:
  /// `on_probe(card, command, seconds, failure)`: a reset or check ended ("" failure: it passed); `on_returned`:
  /// a card is good again.
  CardProber(boost::asio::io_context& io, DevicePool& pool, Executor& executor, HealthConfig health, std::string log_dir,
             std::function<void(int, const std::string&, double, const std::string&)> on_probe, std::function<void(int)> on_returned);
  ~CardProber();
  void start();
  void set_health(HealthConfig health) { health_ = std::move(health); }

 private:
  void tick();
  void probe(int card);
  void run(int card, const std::string& command, std::function<void(bool passed)> done);

  boost::asio::io_context& io_;
  DevicePool& pool_;
  Executor& executor_;
  HealthConfig health_;
  std::string log_dir_;
  std::function<void(int, const std::string&, double, const std::string&)> on_probe_;
  std::function<void(int)> on_returned_;
  std::set<int> probing_, reset_done_;
  int count_ = 0;
  struct Timer;
  std::unique_ptr<Timer> timer_;
};

}  // namespace pto
