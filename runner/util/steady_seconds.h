#pragma once
// Seconds on the monotonic clock: the one clock engine, dispatcher and scheduler estimates share.
#include <chrono>

namespace pto {

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace pto
