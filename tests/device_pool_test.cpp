// DevicePool's look at /proc before it grants a card (devices.card-files): a process outside pto-runner with
// the card's file open keeps the card from being granted. One pass over /proc serves every idle card at once
// (a run's first steps take all the cards in one burst), and a card let go of is looked at again.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "config/runner_config.h"
#include "sched/device_pool.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace pto;
using namespace pto::test;

namespace {

/// A process outside pto-runner holding `file` open until killed (a leftover of the incumbent's task).
pid_t hold_open(const fs::path& file) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("sh", "sh", "-c", ("exec 3<" + file.string() + "; exec sleep 60").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  REQUIRE(wait_until([&] { return sh("ls -l /proc/" + std::to_string(pid) + "/fd | grep -q " + file.filename().string()) == 0; }, 10));
  return pid;
}

void end(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

TEST_CASE("device pool: the look at /proc before a card is granted covers the other idle cards, and a card let go of is "
          "looked at again before it is granted",
          "[sched]") {
  TempDir dir;
  for (int i = 0; i < 3; ++i) std::ofstream(dir.path() / ("davinci" + std::to_string(i))) << "";
  RunnerConfig cfg;
  cfg.device_ids = {0, 1, 2};
  cfg.lock_dir = (dir.path() / "locks").string();
  cfg.card_files = {(dir.path() / "davinci{id}").string()};
  DevicePool pool(cfg, "");
  REQUIRE(pool.init().empty());
  pool.set_scan_at_hand_over(true);  // as without cgroups: a step's escaped process may hold its card's file

  // Card 2's file is open outside: granting card 0 finds that too, in the same pass, and names it.
  const pid_t outside = hold_open(dir.path() / "davinci2");
  std::string why;
  REQUIRE(pool.acquire({0}, "ci / a", 0, why));
  auto status = pool.status();
  CHECK(status[2].state == CardState::Busy);
  CHECK(status[2].holder == "pid " + std::to_string(outside) + " (sleep) has " + (dir.path() / "davinci2").string() + " open");
  CHECK_FALSE(pool.acquire({2}, "ci / b", 0, why));
  CHECK(why == status[2].holder);
  end(outside);

  // Card 0 is let go of and a process opens its file at once: it is looked at again, not granted.
  pool.release({0});
  const pid_t escaped = hold_open(dir.path() / "davinci0");
  CHECK_FALSE(pool.acquire({0}, "ci / c", 0, why));
  CHECK(why.find("pid " + std::to_string(escaped) + " ") == 0);
  end(escaped);
  CHECK(pool.acquire({0}, "ci / c", 0, why));
}
