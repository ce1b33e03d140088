#pragma once
// Real sandbox users for a test (root only): made with `pto-runner sandbox setup` under a prefix of the test's
// own, removed with `sandbox remove` at the end. Shared by the sandbox and the local-submitter tests.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "test_support.h"
#include "util/random_hex.h"

namespace pto::test {

/// Sandbox users of a prefix of their own (never the default pto-step, which other tests' daemons would
/// lend), made with `pto-runner sandbox setup` and removed with `sandbox remove` at the end.
struct SandboxUsers {
  const TempDir& dir;
  std::string prefix = "ptsb" + pto::random_hex(2) + "-";
  int count;
  SandboxUsers(const TempDir& d, int n, const std::string& more = "") : dir(d), count(n) {
    // A cache group of its own too (caches.group), unless the test names one: tests make and remove theirs at once.
    const std::string group = more.find("caches:") == std::string::npos ? "caches:\n  group: " + prefix + "c\n" : "";
    dir.write("runner.yml", "sandbox:\n  users: " + prefix + "\n  count: " + std::to_string(count) + "\n" + more + group);
    CommandResult r = run_cli({"--root", dir.str(), "sandbox", "setup"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(::getpwnam((prefix + "0").c_str()) != nullptr);
  }
  ~SandboxUsers() {
    for (int i = 0; i < count; ++i) sh("pkill -9 -u " + prefix + std::to_string(i) + " 2>/dev/null");
    run_cli({"--root", dir.str(), "sandbox", "remove"});
  }
  uid_t uid(int i) const { return ::getpwnam((prefix + std::to_string(i)).c_str())->pw_uid; }
};

/// Making users and switching to them needs root: elsewhere the case is skipped, said so.
#define SKIP_UNLESS_ROOT()                           \
  do {                                               \
    if (::geteuid() != 0) {                          \
      WARN("SKIPPED: sandbox users need root");      \
      return;                                        \
    }                                                \
  } while (0)

/// The tree and state dir sandbox users must reach (a TempDir is 0700).
inline void open_to_sandbox(const TempDir& dir) { REQUIRE(::chmod(dir.path().c_str(), 0755) == 0); }

}  // namespace pto::test
