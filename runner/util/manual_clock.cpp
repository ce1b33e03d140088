#include "util/manual_clock.h"

#include <cmath>
#include <limits>

#include "util/iso_time.h"

namespace pto {

class ManualClock::ManualTimer : public Clock::Timer {
 public:
  ManualTimer(std::weak_ptr<State> state, std::pair<double, std::uint64_t> key) : state_(std::move(state)), key_(key) {}
  ~ManualTimer() override {
    if (auto s = state_.lock()) s->timers.erase(key_);
  }

 private:
  std::weak_ptr<State> state_;
  std::pair<double, std::uint64_t> key_;
};

ManualClock::ManualClock(double wall_start) : state_(std::make_shared<State>()), wall_start_(wall_start) {}

std::string ManualClock::iso_now() const {
  auto since_epoch = std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::duration<double>(wall_start_ + state_->now));
  return iso_time(std::chrono::system_clock::time_point(since_epoch));
}

std::unique_ptr<Clock::Timer> ManualClock::after(double seconds, std::function<void()> fire) {
  std::pair<double, std::uint64_t> key{state_->now + std::max(0.0, seconds), ++state_->seq};
  state_->timers.emplace(key, std::move(fire));
  return std::make_unique<ManualTimer>(state_, key);
}

double ManualClock::next_due() const {
  return state_->timers.empty() ? std::numeric_limits<double>::infinity() : state_->timers.begin()->first.first;
}

void ManualClock::advance(double seconds) {
  const double until = state_->now + seconds;
  while (!state_->timers.empty() && state_->timers.begin()->first.first <= until) {
    auto it = state_->timers.begin();
    state_->now = std::max(state_->now, it->first.first);
    auto fire = std::move(it->second);
    state_->timers.erase(it);  // fired: its Timer's destructor finds nothing to cancel
    fire();
  }
  state_->now = until;
}

}  // namespace pto
