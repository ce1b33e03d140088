#pragma once
// The ids of runs, steps and leases: each made here and read back here, nowhere else. They are in URLs
// (/api/v1/runs/ID/steps/STEP/log), lease tokens' scopes, card events and the journal, so the API refuses any
// other shape before it looks anything up.
//   run    YYYYMMDD-HHMMSS-xxxx (UTC, x a hex digit): sorts by time, names the run's folder
//   step   JOB-STEP, both 1-based ("3-9"), as in each step's `id` in the run JSON
//   lease  lease-xxxxxxxxxxxx
#include <compare>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pto {

/// A step of a run by place: its job and its step in the plan, both 0-based.
struct StepId {
  std::size_t job = 0, step = 0;
  /// "JOB-STEP", 1-based.
  std::string text() const;
  /// The inverse of text(); nothing for any other shape (or more than 999999 jobs or steps).
  static std::optional<StepId> parse(std::string_view text);
  auto operator<=>(const StepId&) const = default;
};

/// A new run id, from the wall clock and 2 random bytes.
std::string new_run_id();
bool is_run_id(std::string_view s);

/// A new lease id (6 random bytes).
std::string new_lease_id();
bool is_lease_id(std::string_view s);

}  // namespace pto
