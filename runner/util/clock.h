#pragma once
// Clock: time as the engine (and whatever else schedules by time) sees it. `now()` is monotonic seconds,
// `iso_now()` the wall time written into records, and `after()` a one-shot timer. Production uses the
// io_context's steady clock (make_steady_clock); tests own a ManualClock (util/manual_clock.h) and move it,
// so retries, time bounds and waits are tested in microseconds without a real sleep.
//
// Every callback runs on the thread that drives the clock (the io_context's, or the test's advance()).
#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
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

/// Seconds since the epoch, now: the wall clock of what is kept and compared across restarts (card events,
/// test history, notifications' ages).
double epoch_now();

/// The real clocks, read here and nowhere else (tests/architecture_test.cpp keeps it so): `steady_now()` for the
/// deadlines and durations of the process's own blocking waits, `wall_now()` for times written down or shown,
/// `boot_ticks_now()` for comparing with a process's start (/proc's clock ticks since boot). What the engine
/// schedules by goes through a Clock above instead, so its tests move a ManualClock.
inline std::chrono::steady_clock::time_point steady_now() { return std::chrono::steady_clock::now(); }
inline std::chrono::system_clock::time_point wall_now() { return std::chrono::system_clock::now(); }
inline std::time_t wall_time_t() { return std::chrono::system_clock::to_time_t(wall_now()); }
inline std::filesystem::file_time_type file_time_now() { return std::filesystem::file_time_type::clock::now(); }
std::uint64_t boot_ticks_now();

}  // namespace pto
