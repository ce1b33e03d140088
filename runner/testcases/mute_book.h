#pragma once
// A host's mutes as the API changes them (docs/maintainers.md, "Test results"): runner.yml's and the API's
// together (TestMutes), the API's kept through a Keep its owner gives (the daemon: the test history, so a
// restart keeps them), every change refused, with the reason, when it cannot be kept. What every run asks when
// a test fails (muted) and what the status shows (all, in_force) are read here.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "testcases/mutes.h"
#include "util/answer.h"

namespace pto {

class MuteBook {
 public:
  /// Keeps the API's mutes as they are now: "" or why they cannot be kept.
  using Keep = std::function<std::string(const std::vector<TestMute>& api)>;

  MuteBook(const TestsConfig& configured, std::vector<TestMute> kept, Keep keep);

  /// The mute in force today for `test`, if any.
  std::optional<TestMute> muted(const std::string& test) const { return mutes_.match(test, utc_date()); }
  std::vector<TestMute> all() const { return mutes_.all(); }
  int in_force() const { return mutes_.in_force(utc_date()); }

  /// Mutes (or mutes again) `m.id` in the name of `who`: 200 with the mute, 409 past the limit or where
  /// runner.yml mutes it, 503 when it cannot be kept (nothing changes then).
  Answer mute(const TestMute& m, const std::string& who);
  /// Ends the API's mute of `glob`: 200, 404 for none, 409 for runner.yml's (not the API's to end), 503 when
  /// the change cannot be kept.
  Answer unmute(const std::string& glob, const std::string& who);
  /// runner.yml read again (SIGHUP): its mutes and limit replace the old ones, the API's stay.
  void reconfigure(const TestsConfig& configured);

 private:
  TestMutes mutes_;
  std::vector<TestMute> configured_;  // runner.yml's, to tell an unmute of one of them why not
  Keep keep_;
};

}  // namespace pto
