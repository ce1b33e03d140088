#pragma once
// Times as pto-runner writes them everywhere (API, journal, logs): ISO 8601 UTC with milliseconds and `Z`,
// e.g. 2026-11-29T21:49:13.042Z. Fixed width, so they also sort as text (the journal relies on it).
#include <chrono>
#include <string>

namespace pto {

std::string iso_time(std::chrono::system_clock::time_point t);
std::string iso_now();
/// Seconds since the epoch (as the journal keeps card events and test results), as ISO time.
std::string iso_from_epoch(double seconds);
/// The other way (what iso_time writes, milliseconds optional); -1 when it is not such a time.
double epoch_from_iso(const std::string& iso);

}  // namespace pto
