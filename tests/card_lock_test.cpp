// CardLock: a card is an flock on <lock-dir>/npu-<id>.lock with a holder line for whoever waits on it.
// flock locks belong to an open file description, so a second open() in this process contends like another
// process would.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "sched/card_lock.h"
#include "test_support.h"

using pto::CardLock;
using pto::test::TempDir;

namespace {
std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("card lock: the holder line starts pid=PID, as the incumbent's readers parse it, names the step while held, and is blanked on release", "[sched]") {
  TempDir dir;
  std::string holder, error;
  const std::string me = "pid=" + std::to_string(getpid()) + " (";
  {
    auto lock = CardLock::try_acquire(dir.str(), 3, "ci / moe", holder, error);
    REQUIRE(lock);
    CHECK(error.empty());
    std::string seen;
    REQUIRE(CardLock::held_elsewhere(dir.str(), 3, seen));
    CHECK(seen == me + "ci / moe)");
    std::string text = file_text(CardLock::path_for(dir.str(), 3));
    CHECK(std::stoi(text.substr(text.find("pid=") + 4)) == getpid());  // the incumbent's readers parse this
    // A second acquire of a held card fails with the holder, not an error.
    std::string h2, e2;
    CHECK_FALSE(CardLock::try_acquire(dir.str(), 3, "other / step", h2, e2));
    CHECK(h2 == me + "ci / moe)");
    CHECK(e2.empty());
  }
  std::string seen;
  CHECK_FALSE(CardLock::held_elsewhere(dir.str(), 3, seen));
  std::string after = file_text(CardLock::path_for(dir.str(), 3));
  CHECK(after.find("ci / moe") == std::string::npos);  // no stale holder left in the file
}

TEST_CASE("card lock: a shorter holder after a longer one leaves no stale tail, long labels are cut", "[sched]") {
  TempDir dir;
  std::string holder, error, seen;
  {
    auto l = CardLock::try_acquire(dir.str(), 0, std::string(600, 'x'), holder, error);
    REQUIRE(l);
    REQUIRE(CardLock::held_elsewhere(dir.str(), 0, seen));
    CHECK(seen.size() == 255);
    CHECK(seen.rfind("pid=", 0) == 0);
  }
  {
    auto l = CardLock::try_acquire(dir.str(), 0, "j / s", holder, error);
    REQUIRE(l);
    REQUIRE(CardLock::held_elsewhere(dir.str(), 0, seen));
    CHECK(seen == "pid=" + std::to_string(getpid()) + " (j / s)");
  }
}

TEST_CASE("card lock: an unwritable lock directory is an error, not a busy card", "[sched]") {
  std::string holder, error;
  CHECK_FALSE(CardLock::try_acquire("/nonexistent/pto-runner-locks", 0, "j / s", holder, error));
  CHECK(holder.empty());
  CHECK(error.find("/nonexistent/pto-runner-locks/npu-0.lock") != std::string::npos);
}
