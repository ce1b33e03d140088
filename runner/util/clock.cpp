#include "util/clock.h"

#include <time.h>
#include <unistd.h>

#include <chrono>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "util/iso_time.h"
#include "util/steady_seconds.h"

namespace pto {

namespace {

class SteadyTimer : public Clock::Timer {
 public:
  SteadyTimer(boost::asio::io_context& io, double seconds, std::function<void()> fire)
      : timer_(io), alive_(std::make_shared<bool>(true)) {
    timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(seconds > 0 ? seconds : 0)));
    timer_.async_wait([alive = alive_, fire = std::move(fire)](boost::system::error_code ec) {
      if (!ec && *alive) fire();
    });
  }
  ~SteadyTimer() override {
    *alive_ = false;
    timer_.cancel();
  }

 private:
  boost::asio::steady_timer timer_;
  std::shared_ptr<bool> alive_;
};

class SteadyClock : public Clock {
 public:
  explicit SteadyClock(boost::asio::io_context& io) : io_(io) {}
  double now() const override { return steady_seconds(); }
  std::string iso_now() const override { return pto::iso_now(); }
  std::unique_ptr<Timer> after(double seconds, std::function<void()> fire) override {
    return std::make_unique<SteadyTimer>(io_, seconds, std::move(fire));
  }

 private:
  boost::asio::io_context& io_;
};

}  // namespace

std::unique_ptr<Clock> make_steady_clock(boost::asio::io_context& io) { return std::make_unique<SteadyClock>(io); }

std::uint64_t boot_ticks_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  const std::uint64_t hz = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
  return static_cast<std::uint64_t>(ts.tv_sec) * hz + static_cast<std::uint64_t>(ts.tv_nsec) * hz / 1000000000ull;
}

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace pto
