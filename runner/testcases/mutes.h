#pragma once
// Muted tests (SPEC "Flaky and muted"): runner.yml's `tests.mute` and the API's mutes together, which of them a
// test id falls under today, and muting a judged attempt's failures. A muted test still runs and its result is
// shown (`muted`, with the mute's reason); its failure never makes a step red. An expired mute mutes nothing.
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "testcases/case_result.h"
#include "util/clock.h"

namespace pto {

/// `*` matches any run of characters (`/` and `::` included), `?` one character; everything else, `[` of a
/// parametrized id included, is itself.
bool test_glob_match(const std::string& glob, const std::string& id);

/// Today as YYYY-MM-DD in UTC (a mute's `until` is a UTC date, inclusive).
std::string utc_date(std::time_t t = wall_time_t());

class TestMutes {
 public:
  TestMutes() = default;
  TestMutes(std::vector<TestMute> configured, std::vector<TestMute> api, int max_muted)
      : configured_(std::move(configured)), api_(std::move(api)), max_muted_(max_muted) {}

  /// The mute in force today for `id` (runner.yml's first, then the API's, in their order).
  std::optional<TestMute> match(const std::string& id, const std::string& today) const;
  /// Every mute, runner.yml's first; `in_force` says whether it mutes anything on `today`.
  std::vector<TestMute> all() const;
  int in_force(const std::string& today) const;
  const std::vector<TestMute>& api() const { return api_; }
  int max_muted() const { return max_muted_; }

  /// Adds or replaces (same glob) an API mute: "" or why not (the limit, a glob runner.yml already mutes).
  std::string add(const TestMute& m, const std::string& today);
  /// Removes the API mute of `glob`: false when there is none.
  bool remove(const std::string& glob);

 private:
  std::vector<TestMute> configured_, api_;
  int max_muted_ = 20;
};

/// Mutes, in place, the failures (failed or error; a victim is already the card's) of `cases` that `muted`
/// names: result `muted`, the mute's reason kept. Returns how many were muted and how many of them were the
/// code's (for the attempt's count of code failures).
struct MutedCount {
  int muted = 0, code = 0;
};
template <typename Lookup>
MutedCount mute_failures(std::vector<TestCase>& cases, Lookup&& muted) {
  MutedCount n;
  for (TestCase& c : cases) {
    if (c.result != TestResult::Failed && c.result != TestResult::Error) continue;
    std::optional<TestMute> m = muted(c.id);
    if (!m) continue;
    ++n.muted;
    n.code += c.cause == FailureCause::Code;
    c.result = TestResult::Muted;
    c.muted = m->reason + " (until " + m->until + ")";
  }
  return n;
}

}  // namespace pto
