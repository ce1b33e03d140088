#pragma once
// ManualClock: a Clock that moves only when its owner says so (tests, and simulations in virtual time), as
// Envoy's SimulatedTimeSystem. advance() fires every timer that falls due, in the order of their due times
// (ties in the order they were armed), with now() at each one's due time; a timer armed by a callback fires
// in the same advance() when it falls due within it.
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "util/clock.h"

namespace pto {

class ManualClock : public Clock {
 public:
  /// `wall_start`: the wall time at now() == 0, as Unix seconds (default 2026-12-01T00:00:00Z).
  explicit ManualClock(double wall_start = 1796083200);
  double now() const override { return state_->now; }
  std::string iso_now() const override;
  std::unique_ptr<Timer> after(double seconds, std::function<void()> fire) override;
  /// Moves time forward by `seconds`, firing what falls due on the way.
  void advance(double seconds);
  /// Timers armed and not yet fired or cancelled.
  std::size_t pending() const { return state_->timers.size(); }
  /// When the next timer is due (infinity when none is).
  double next_due() const;

 private:
  struct State {
    double now = 0;
    std::uint64_t seq = 0;
    std::map<std::pair<double, std::uint64_t>, std::function<void()>> timers;
  };
  class ManualTimer;
  std::shared_ptr<State> state_;
  double wall_start_;
};

}  // namespace pto
