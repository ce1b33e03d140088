#pragma once
// Seconds on the monotonic clock: the one clock engine, dispatcher and scheduler estimates share.
#include <chrono>
#include "util/clock.h"

namespace pto {

inline double steady_seconds() {
  return std::chrono::duration<double>(steady_now().time_since_epoch()).count();
}

}  // namespace pto
