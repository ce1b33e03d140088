#pragma once
// The daemon's own event log (spdlog, on stderr): UTC times with a `Z`, as text lines or as one JSON object per
// line for a log shipper (`serve --log-format json`), at a chosen level (`--log-level`).
#include <string>

namespace pto {

/// Sets up the default logger. Returns "" or what is wrong with `format` or `level`.
std::string setup_daemon_log(const std::string& format, const std::string& level);

}  // namespace pto
