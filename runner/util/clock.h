#pragma once
// Clock: time as the engine (and whatever else schedules by time) sees it. `now()` is monotonic seconds,
// `iso_now()` the wall time written into records, and `after()` a one-shot timer. Production uses the
// io_context's steady clock (make_steady_clock); tests own a ManualClock (util/manual_clock.h) and move it,
// so retries, time bounds and waits are tested in microseconds without a real sleep.
//
// Every callback runs on the thread that drives the clock (the io_context's, or the test's advance()).
#include <functional>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace pto {

class Clock {
 public:
  /// A pending timer. Destroying it cancels it: its callback never runs afterwards, also when it was already
  /// due and queued (asio would still run such a handler with success; the wrapper checks it was not cancelled).
  class Timer {
   public:
    virtual ~Timer() = default;
  };
  virtual ~Clock() = default;
  virtual double now() const = 0;
  virtual std::string iso_now() const = 0;
  /// Calls `fire` once, `seconds` from now (at once, on the next turn, when <= 0), unless cancelled first.
  [[nodiscard]] virtual std::unique_ptr<Timer> after(double seconds, std::function<void()> fire) = 0;
};

/// The real clock: std::chrono::steady_clock and system time, timers on `io`.
std::unique_ptr<Clock> make_steady_clock(boost::asio::io_context& io);

}  // namespace pto
