// Steps held by the host's supervisor outlive the daemon and are taken over by the next one (supervise/,
// hosting/run_host_adopt.cpp; SPEC "Nothing lost when the daemon stops"). Real daemons, real SIGKILLs, real
// flocks; the cards are numbers (no NPU here).
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "sandbox_users.h"
#include "served_daemon.h"
#include "sched/card_lock.h"

using namespace pto::test;
namespace api_path = pto::api_path;

namespace {

/// A job of `n` one-card steps: each leaves a marker file per run of it (a second one says it ran twice),
/// prints a start and an end line `seconds` apart, and records its card and times.
std::string marked_steps(int n, const fs::path& marks, double seconds) {
  std::ostringstream y;
  y << "name: twelve\nparallel: true\nsteps:\n";
  for (int i = 0; i < n; ++i)
    y << "  - name: s" << i << "\n    devices: 1\n    run: 'echo start " << i << "; echo x >> " << (marks / ("s" + std::to_string(i))).string()
      << "; s=$(date +%s%N); sleep " << seconds << "; echo \"$TASK_DEVICE $s $(date +%s%N)\" >> " << (marks / "uses").string()
      << "; echo end " << i << "'\n";
  return y.str();
}

/// A directory in the test's tree every step may write its marker files to.
fs::path marks_dir(const Served& s) {
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  fs::permissions(marks, fs::perms::all);
  return marks;
}

struct Use {
  int card;
  long long start, end;
};

std::vector<Use> read_uses(const fs::path& p) {
  std::vector<Use> out;
  std::istringstream in(read_file(p));
  Use u{};
  while (in >> u.card >> u.start >> u.end) out.push_back(u);
  return out;
}

/// Whether two uses of one card overlap in time.
bool card_shared(const std::vector<Use>& uses) {
  for (std::size_t i = 0; i < uses.size(); ++i)
    for (std::size_t j = i + 1; j < uses.size(); ++j)
      if (uses[i].card == uses[j].card && uses[i].start < uses[j].end && uses[j].start < uses[i].end) return true;
  return false;
}

}  // namespace

TEST_CASE("supervise: a run of 12 one-card steps on 4 cards outlives a SIGKILLed daemon and is taken over by the next one",
          "[supervise]") {
  Served s;
  s.devices = "0,1,2,3";
  const fs::path marks = marks_dir(s);
  write_project(s.dir, {{"twelve.yml", marked_steps(12, marks, 1.5)}});
  s.start();
  // The run's submitter follows it, started before the kill: it must see the run to its end.
  Spawned follower = spawn_cli({"submit", "--server", s.url(), "--token-file", (fs::path(s.state()) / "token").string(), "--job", "twelve",
                                "--wait", "--poll-interval", "0.2"});
  std::string id;
  REQUIRE(wait_until([&] {
    const json runs = s.get(api_path::kRuns)["runs"];
    if (!runs.empty()) id = runs[0]["id"];
    return !id.empty();
  }, 30));
  // In the middle: the first four run, none of the rest has started.
  REQUIRE(wait_until([&] { return fs::exists(marks / "s3") && fs::exists(marks / "s0"); }, 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const json before = s.get(api_path::run(id));
  int running = 0;
  for (const auto& st : before["jobs"][0]["steps"]) running += st["state"] == "running";
  CHECK(running == 4);
  s.stop(SIGKILL);
  s.listen = "127.0.0.1:" + std::to_string(s.port);  // where its clients look for it again
  // The steps run on while no daemon runs: their supervisor holds them (and their cards' flocks).
  std::string holder;
  CHECK(pto::CardLock::held_elsewhere(s.locks(), 0, holder));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  s.start();
  const json run = s.wait_run(id, 60);
  INFO(run.dump(2));
  CHECK(run["state"] == "succeeded");
  for (int i = 0; i < 12; ++i) {
    INFO("step s" << i);
    CHECK(read_file(marks / ("s" + std::to_string(i))) == "x\n");  // ran exactly once
    const auto log = pto::api_request("GET", s.url(api_path::step_log(id, "1-" + std::to_string(i + 1))));
    CHECK(log.body.find("start " + std::to_string(i) + "\n") != std::string::npos);
    CHECK(log.body.find("end " + std::to_string(i) + "\n") != std::string::npos);
  }
  const auto uses = read_uses(marks / "uses");
  CHECK(uses.size() == 12);
  CHECK_FALSE(card_shared(uses));
  // The follower lost the server for a moment and carried on to the run's end.
  CommandResult followed = wait_cli(follower);
  INFO(followed.out << followed.err);
  CHECK(followed.exit_code == 0);
  // After the run nothing of it is held: every card free, no lock left; the status says what was taken over.
  const json status = s.get(api_path::kStatus);
  CHECK(status["supervisor"]["taken_over"] == json::array({id}));
  CHECK(status["supervisor"]["pid"].get<int>() > 0);
  CHECK(status["supervisor"]["steps"] == 0);
  for (const auto& d : status["devices"]) CHECK(d["state"] == "free");
  CHECK_FALSE(pto::CardLock::held_elsewhere(s.locks(), 0, holder));
}

TEST_CASE("supervise: a step that ends while no daemon runs keeps its exit status and its whole log for the next one", "[supervise]") {
  Served s;
  const fs::path marks = marks_dir(s);
  // It masks a value of its own and hands it back as an output: masked after the take-over too.
  write_project(s.dir, {{"brief.yml", "name: brief\nsteps:\n  - name: short\n    id: short\n    devices: 1\n    run: 'echo before; echo ::add-mask::hidden-4711-value; touch " +
                                          (marks / "started").string() + "; sleep 1; echo after; echo key=hidden-4711-value >> $GITHUB_OUTPUT; exit 3'\n"
                                          "  - name: later\n    run: 'echo later'\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"brief"}}});
  REQUIRE(wait_until([&] { return fs::exists(marks / "started"); }, 30));
  s.stop(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));  // it ends meanwhile
  s.start();
  const json run = s.wait_run(id, 30);
  INFO(run.dump(2));
  CHECK(run["state"] == "failed");
  const json& step = run["jobs"][0]["steps"][0];
  CHECK(step["state"] == "failed");
  CHECK(step["exit_code"] == 3);
  CHECK(run["jobs"][0]["steps"][1]["state"] == "skipped");
  const auto log = pto::api_request("GET", s.url(api_path::step_log(id, "1-1")));
  CHECK(log.body.rfind("before\n", 0) == 0);
  CHECK(log.body.find("after\n") != std::string::npos);
  CHECK(log.body.find("hidden-4711-value") == std::string::npos);
  CHECK(step["outputs"]["key"] == "***");
  CHECK(run.dump().find("hidden-4711-value") == std::string::npos);
}

TEST_CASE("supervise: a step whose daemon never comes back ends at its own timeout, and the next daemon says so", "[supervise]") {
  Served s;
  const fs::path marks = marks_dir(s);
  write_project(s.dir, {{"hang.yml", "name: hang\nsteps:\n  - name: h\n    timeout-minutes: 0.02\n    run: 'echo $$ > " +
                                         (marks / "pid").string() + "; sleep 120'\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"hang"}}});
  REQUIRE(wait_for_content(marks / "pid"));
  const int pid = std::stoi(read_file(marks / "pid"));
  s.stop(SIGKILL);
  // No daemon: its supervisor ends it at timeout-minutes (1.2 s) all the same.
  CHECK(wait_until([&] { return !pid_running(pid); }, 30));
  s.start();
  const json run = s.wait_run(id, 30);
  INFO(run.dump(2));
  CHECK(run["state"] == "failed");
  CHECK(run["jobs"][0]["steps"][0]["state"] == "timed_out");
}

TEST_CASE("supervise: with supervise: false the steps are the daemon's own and a SIGKILL interrupts the run", "[supervise]") {
  Served s;
  const fs::path marks = marks_dir(s);
  s.dir.write("runner.yml", "supervise: false\n");
  write_project(s.dir, {{"long.yml", "name: long\nsteps:\n  - name: wait\n    run: 'echo $$ > " + (marks / "pid").string() + "; sleep 60'\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"long"}}});
  REQUIRE(wait_for_content(marks / "pid"));
  const int pid = std::stoi(read_file(marks / "pid"));
  s.stop(SIGKILL);
  s.start();
  CHECK_FALSE(pid_running(pid));
  CHECK(s.get(api_path::run(id))["state"] == "interrupted");
  CHECK_FALSE(fs::exists(fs::path(s.state()) / "supervisor" / "sock"));
}

TEST_CASE("supervise: the supervisor's socket and lock are root's alone, and it leaves once its daemon stopped with nothing held",
          "[supervise]") {
  Served s;
  write_project(s.dir, {{"q.yml", "name: q\nsteps:\n  - run: 'true'\n"}});
  s.start();
  CHECK(s.wait_run(s.submit_run({{"jobs", {"q"}}}))["state"] == "succeeded");
  const fs::path dir = fs::path(s.state()) / "supervisor";
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(st.st_uid == 0);
  REQUIRE(::stat((dir / "sock").c_str(), &st) == 0);
  CHECK((st.st_mode & 0077) == 0);
  s.stop(SIGTERM);
  CHECK(wait_until([&] { return !fs::exists(dir / "sock"); }, 10));
}

TEST_CASE("supervise: a sandboxed step can neither reach its supervisor's socket nor signal it, and its run is taken over "
          "as the same user",
          "[supervise][sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 1);
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  ::chmod(marks.c_str(), 01777);
  const std::string sock = s.state() + "/supervisor/sock";
  write_project(s.dir, {{"probe.yml", "name: probe\nsteps:\n  - name: try\n    devices: 1\n    run: |\n"
                                      "      python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"" + sock + "\")' 2>&1 | tail -1 || true\n"
                                      "      kill -TERM $(cat " + (marks / "supervisor.pid").string() + ") 2>&1 || echo signal refused\n"
                                      "      echo \"uid $(id -u)\"; touch " + (marks / "started").string() + "\n"
                                      "      sleep 2\n"
                                      "      echo \"still uid $(id -u)\"\n"}});
  s.start();
  std::string pid;
  REQUIRE(sh("pgrep -f 'supervise --dir " + s.state() + "/supervisor' | head -1", &pid) == 0);
  REQUIRE(!pid.empty());
  std::ofstream(marks / "supervisor.pid") << pid;
  const std::string id = s.submit_run({{"jobs", {"probe"}}});
  const bool started = wait_until([&] { return fs::exists(marks / "started"); }, 30);
  INFO(s.get(api_path::run(id)).dump(2));
  REQUIRE(started);
  s.stop(SIGKILL);
  s.start();
  const json run = s.wait_run(id, 30);
  INFO(run.dump(2));
  CHECK(run["state"] == "succeeded");
  const std::string log = pto::api_request("GET", s.url(api_path::step_log(id, "1-1"))).body;
  INFO(log);
  CHECK(log.find("PermissionError") != std::string::npos);  // the socket's directory is root's alone
  CHECK(log.find("signal refused") != std::string::npos);
  const std::string uid = std::to_string(users.uid(0));
  CHECK(log.find("uid " + uid + "\n") != std::string::npos);
  CHECK(log.find("still uid " + uid + "\n") != std::string::npos);
  CHECK(pid_running(std::stoi(pid)));  // the supervisor lives on
}

TEST_CASE("supervise: a step's leased command keeps its card across a daemon's SIGKILL, and no other step gets it meanwhile",
          "[supervise][lease]") {
  Served s;
  s.devices = "0,1";
  const fs::path marks = marks_dir(s);
  const std::string m = marks.string();
  // The harness's step leases one card and runs a 4 s batch on it; the other job needs both cards.
  write_project(s.dir, {{"harness.yml", "name: harness\nsteps:\n  - name: batch\n    run: task-submit --device-num 1 --run 'echo $TASK_DEVICE > " + m +
                                            "/card; touch " + m + "/leased; sleep 4; date +%s%N > " + m + "/lease-end'\n"},
                        {"both.yml", "name: both\nsteps:\n  - name: pair\n    devices: 2\n    run: 'date +%s%N > " + m + "/pair-start'\n"}});
  s.start();
  const std::string harness = s.submit_run({{"jobs", {"harness"}}});
  REQUIRE(wait_until([&] { return fs::exists(marks / "leased"); }, 30));
  const int card = std::stoi(read_file(marks / "card"));
  s.stop(SIGKILL);
  s.listen = "127.0.0.1:" + std::to_string(s.port);
  // No daemon: the leased card's flock is still held (by the step supervisor) for the command.
  std::string holder;
  CHECK(pto::CardLock::held_elsewhere(s.locks(), card, holder));
  s.start();
  const std::string both = s.submit_run({{"jobs", {"both"}}});
  const bool ended = wait_until([&] {
    auto r = pto::api_request("GET", s.url(api_path::run(harness)));
    return !r.reached || json::parse(r.body, nullptr, false).value("state", "") != "running";
  }, 60);
  INFO("the daemon said: " << read_file(s.proc.out) << read_file(s.proc.err) << "\nthe supervisor said: "
                             << read_file(fs::path(s.state()) / "supervisor/supervisor.log"));
  REQUIRE(ended);
  const json h = s.wait_run(harness, 60);
  INFO(h.dump(2));
  CHECK(h["state"] == "succeeded");
  const json b = s.wait_run(both, 60);
  CHECK(b["state"] == "succeeded");
  REQUIRE(wait_for_content(marks / "lease-end"));
  REQUIRE(wait_for_content(marks / "pair-start"));
  // The pair started only once the leased command was over.
  CHECK(std::stoll(read_file(marks / "pair-start")) >= std::stoll(read_file(marks / "lease-end")));
  const std::string log = pto::api_request("GET", s.url(api_path::step_log(harness, "1-1"))).body;
  CHECK(log.find("lost the daemon") == std::string::npos);
}

TEST_CASE("supervise: 12 task-submit clients waiting for cards while 12 one-card steps hold the 4 cards, the daemon SIGKILLed "
          "twice and handed over once meanwhile: every leased command runs once, no card is held twice at once, the run succeeds",
          "[supervise][lease]") {
  Served s;
  s.devices = "0,1,2,3";
  const fs::path marks = marks_dir(s);
  const std::string m = marks.string();
  // The harness's way: steps that hold no card lease one per batch through task-submit.
  std::string job = marked_steps(12, marks, 1.5);
  for (int i = 0; i < 12; ++i)
    job += "  - name: lease" + std::to_string(i) + "\n    run: |\n      task-submit --device-num 1 --timeout 120 --run 'echo x >> " + m + "/l" +
           std::to_string(i) + "; s=$(date +%s%N); sleep 1; echo \"$TASK_DEVICE $s $(date +%s%N)\" >> " + m + "/uses'\n";
  write_project(s.dir, {{"twelve.yml", job}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"twelve"}}});
  s.listen = "127.0.0.1:" + std::to_string(s.port);
  REQUIRE(wait_until([&] { return fs::exists(marks / "s0"); }, 30));
  // While they wait: killed, killed again, handed over.
  for (int sig : {SIGKILL, SIGKILL, SIGUSR2}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    s.stop(sig);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    s.start();
  }
  const json run = s.wait_run(id, 120);
  INFO(run.dump(2) << "\nthe daemon said: " << read_file(s.proc.err));
  CHECK(run["state"] == "succeeded");
  for (int i = 0; i < 12; ++i) {
    INFO("lease " << i);
    CHECK(read_file(marks / ("l" + std::to_string(i))) == "x\n");  // ran exactly once
    CHECK(read_file(marks / ("s" + std::to_string(i))) == "x\n");
  }
  const auto uses = read_uses(marks / "uses");
  CHECK(uses.size() == 24);
  CHECK_FALSE(card_shared(uses));
}

TEST_CASE("supervise: a run nobody can take over (its supervisor died too) is recovered with each step as it last changed",
          "[supervise]") {
  Served s;
  const fs::path marks = marks_dir(s);
  write_project(s.dir, {{"two.yml", "name: two\nsteps:\n  - {name: first, run: 'echo done'}\n"
                                    "  - {name: second, run: 'echo $$ > " + (marks / "pid").string() + "; sleep 60'}\n"}});
  s.start();
  const int supervisor = s.get(api_path::kStatus)["supervisor"]["pid"].get<int>();
  const std::string id = s.submit_run({{"jobs", {"two"}}});
  REQUIRE(wait_for_content(marks / "pid"));
  const int pid = std::stoi(read_file(marks / "pid"));
  s.stop(SIGKILL);
  REQUIRE(::kill(supervisor, SIGKILL) == 0);
  REQUIRE(wait_until([&] { return !pid_running(supervisor); }, 10));
  s.start();
  // Its steps' JSON was kept with the engine's state (no journal events with a supervisor): the step that
  // ended is shown as it ended, the one that ran is interrupted, and nothing of the run is left running.
  const json run = s.get(api_path::run(id));
  INFO(run.dump(2));
  CHECK(run["state"] == "interrupted");
  CHECK(run["jobs"][0]["steps"][0]["state"] == "succeeded");
  CHECK(run["jobs"][0]["steps"][0]["exit_code"] == 0);
  CHECK(run["jobs"][0]["steps"][1]["state"] == "interrupted");
  CHECK(run["jobs"][0]["steps"][1]["started"].is_string());
  CHECK(wait_until([&] { return !pid_running(pid); }, 10));
}
