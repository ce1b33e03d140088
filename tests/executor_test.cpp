// The local executor with real processes: output, exit codes, signals, timeouts, and the sweep of setsid
// escapees.
#include <catch2/catch.hpp>
#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "exec/executor.h"
#include "exec/process_sweep.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {

struct Ran {
  StepOutcome outcome;
  std::vector<std::string> lines;
  std::string log;
};

Ran run_step(const std::string& command, double timeout = 0, const std::string& marker = "", double grace = 1,
             const std::string& cwd = "") {
  TempDir t;
  boost::asio::io_context io;
  auto ex = make_local_executor(io);
  Ran r;
  StepLaunch l;
  l.label = "t";
  l.command = command;
  l.env = {"PATH=/usr/bin:/bin", "HOME=/tmp", "GREETING=hi"};
  l.log_path = (t.path() / "step.log").string();
  l.marker = marker.empty() ? "test-" + std::to_string(getpid()) + "-" + std::to_string(rand()) : marker;
  l.timeout_seconds = timeout;
  l.grace_seconds = grace;
  l.working_directory = cwd.empty() ? t.str() : cwd;
  l.on_line = [&](std::string_view s) { r.lines.emplace_back(s); };
  bool done = false;
  ex->start(l, [&](const StepOutcome& o) {
    r.outcome = o;
    done = true;
  });
  io.run();
  REQUIRE(done);
  r.log = read_file(l.log_path);
  return r;
}

bool alive(int pid) { return ::kill(pid, 0) == 0; }

/// `sleep 1000`, its log in `t`, ended by SIGTERM within a second's grace.
StepLaunch sleeping_step(const TempDir& t, const std::string& name) {
  StepLaunch l;
  l.command = "sleep 1000";
  l.env = {"PATH=/usr/bin:/bin"};
  l.log_path = (t.path() / "log").string();
  l.marker = name + "-" + std::to_string(getpid());
  l.grace_seconds = 1;
  return l;
}

}  // namespace

TEST_CASE("executor: output goes to the log and the console, env is exactly what was given", "[exec]") {
  auto r = run_step("echo out; echo err >&2; echo \"$GREETING ${USER:-nouser}\"");
  CHECK(r.outcome.ok());
  CHECK(r.lines == std::vector<std::string>{"out", "err", "hi nouser"});
  CHECK(r.log == "out\nerr\nhi nouser\n");
}

TEST_CASE("executor: bash -e -o pipefail semantics and exit codes", "[exec]") {
  CHECK(run_step("false; echo never").outcome.exit_code == 1);
  CHECK(run_step("exit 7").outcome.exit_code == 7);
  CHECK(run_step("false | true").outcome.exit_code == 1);  // pipefail
  auto r = run_step("kill -KILL $$");
  CHECK(r.outcome.signal == SIGKILL);
  CHECK(r.outcome.exit_code == -1);
}

TEST_CASE("executor: a missing working directory is a clear start error", "[exec]") {
  auto r = run_step("true", 0, "", 1, "/nonexistent/dir");
  CHECK_FALSE(r.outcome.ok());
  CHECK(r.outcome.error.find("/nonexistent/dir") != std::string::npos);
}

TEST_CASE("executor: timeout kills a SIGTERM-trapping child and its setsid grandchild", "[exec]") {
  TempDir t;
  const std::string marker = "escape-" + std::to_string(getpid());
  auto pidfile = (t.path() / "grandchild.pid").string();
  // The child ignores SIGTERM; its grandchild leaves the process group with setsid.
  auto r = run_step("trap '' TERM; setsid sleep 1000 & echo $! > " + pidfile + "; sleep 1000", 0.5, marker, 0.3);
  CHECK(r.outcome.timed_out);
  CHECK(r.outcome.signal == SIGKILL);  // the trap held off SIGTERM until the grace period ended
  int grandchild = std::stoi(read_file(pidfile));
  // setsid forks when the caller is a group leader; the marked process is what must be gone.
  CHECK(find_marked_processes(marker).empty());
  // The escapee may linger as a zombie of init for an instant, but it no longer runs.
  bool running = alive(grandchild) && read_file("/proc/" + std::to_string(grandchild) + "/stat").find(") Z") == std::string::npos;
  CHECK_FALSE(running);
  CHECK(r.log.find("timed out; SIGTERM to process group") != std::string::npos);
}

TEST_CASE("executor: background children of a finished step are killed with it", "[exec]") {
  const std::string marker = "bg-" + std::to_string(getpid());
  // The pause lets setsid leave the group before bash exits, so only the marker sweep can find it.
  auto r = run_step("sleep 1000 & setsid sleep 1000 & sleep 0.3; echo started", 0, marker);
  CHECK(r.outcome.ok());
  CHECK(find_marked_processes(marker).empty());
  CHECK(r.log.find("killed") != std::string::npos);
}

TEST_CASE("executor: cancel stops a running step", "[exec]") {
  TempDir t;
  boost::asio::io_context io;
  auto ex = make_local_executor(io);
  StepOutcome got;
  auto id = ex->start(sleeping_step(t, "cancel"), [&](const StepOutcome& o) { got = o; });
  boost::asio::steady_timer timer(io, std::chrono::milliseconds(100));
  timer.async_wait([&](auto) { ex->cancel(id); });
  io.run();
  CHECK(got.cancelled);
  CHECK(got.signal == SIGTERM);
  CHECK(ex->active() == 0);
}

TEST_CASE("executor: a step cancelled before the spawner answered is stopped once it started, and nothing else is signalled", "[exec][spawner]") {
  TempDir t;
  boost::asio::io_context io;
  auto ex = make_local_executor(io);
  StepOutcome got;
  bool done = false;
  // A SIGTERM to this process's own group (kill(-0), the pid not known yet) would end the test run itself.
  auto id = ex->start(sleeping_step(t, "spawner-cancel"), [&](const StepOutcome& o) {
    got = o;
    done = true;
  });
  ex->cancel(id);  // at once: the spawner has not answered
  io.run();
  REQUIRE(done);
  CHECK(got.cancelled);
  CHECK(got.signal == SIGTERM);
  CHECK(got.pid > 0);
}
