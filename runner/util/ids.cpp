#include "util/ids.h"

#include <ctime>

#include "util/random_hex.h"
#include "util/clock.h"

namespace pto {

namespace {

bool digits(std::string_view s, std::size_t min, std::size_t max) {
  if (s.size() < min || s.size() > max) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

bool lower_hex(std::string_view s, std::size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::size_t number(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n = n * 10 + static_cast<std::size_t>(c - '0');
  return n;
}

}  // namespace

std::string StepId::text() const { return std::to_string(job + 1) + "-" + std::to_string(step + 1); }

std::optional<StepId> StepId::parse(std::string_view text) {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::string_view j = text.substr(0, dash), s = text.substr(dash + 1);
  if (!digits(j, 1, 6) || !digits(s, 1, 6)) return std::nullopt;
  const std::size_t job = number(j), step = number(s);
  if (job == 0 || step == 0) return std::nullopt;
  return StepId{job - 1, step - 1};
}

std::string new_run_id() {
  std::time_t t = wall_time_t();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + random_hex(2);
}

bool is_run_id(std::string_view s) {
  return s.size() == 20 && digits(s.substr(0, 8), 8, 8) && s[8] == '-' && digits(s.substr(9, 6), 6, 6) && s[15] == '-' &&
         lower_hex(s.substr(16), 4);
}

std::string new_lease_id() { return "lease-" + random_hex(6); }

bool is_lease_id(std::string_view s) { return s.size() == 18 && s.substr(0, 6) == "lease-" && lower_hex(s.substr(6), 12); }

}  // namespace pto
