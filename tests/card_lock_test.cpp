// CardLock: a card is an flock on <lock-dir>/npu-<id>.lock with a holder line for whoever waits on it.
// flock locks belong to an open file description, so a second open() in this process contends like another
// process would.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

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

TEST_CASE("card lock: a holder that wrote no line is named by its pid from /proc/locks", "[sched]") {
  TempDir dir;
  const std::string path = CardLock::path_for(dir.str(), 5);
  { std::ofstream(path) << ""; }  // an empty lock file: the holder writes nothing, as a person's `flock FILE cmd`
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) _exit(1);
    char c = 'x';
    if (::write(ready[1], &c, 1) != 1) _exit(1);
    ::pause();
    _exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  std::string seen;
  const bool held = CardLock::held_elsewhere(dir.str(), 5, seen);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  REQUIRE(held);
  CHECK(seen == "pid=" + std::to_string(child) + " (wrote no holder line)");
}
