// Card leases and the task-submit drop-in against a real daemon: one queue for steps and leases, no card shared,
// no starvation, task-submit's exit codes, a killed client's cards coming back, a run's leases dying with it,
// and the incumbent's lock file names.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <fstream>
#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "host/host.h"
#include "served_daemon.h"
#include "server/lease_endpoint.h"
#include "store/journal.h"
#include "test_support.h"
#include "util/api_paths.h"
#include "util/state_paths.h"

using namespace pto::test;

namespace {

/// A directory with a `task-submit` symlink to the built binary, for PATH.
struct TaskSubmit {
  TempDir dir;
  TaskSubmit() { fs::create_symlink(PTO_RUNNER_BIN, dir.path() / "task-submit"); }
  std::string path_env() const { return dir.str() + ":" + std::getenv("PATH"); }
  std::string bin() const { return (dir.path() / "task-submit").string(); }
};

std::map<std::string, std::string> client_env(const Served& s, const TaskSubmit& ts) {
  return {{"PTO_RUNNER_SERVER", s.url()}, {"PTO_RUNNER_TOKEN", s.token}, {"PATH", ts.path_env()}};
}

CommandResult task_submit(const Served& s, const TaskSubmit& ts, std::vector<std::string> args) {
  args.insert(args.begin(), "task-submit");
  return run_cli(args, client_env(s, ts));
}

struct Use {
  std::vector<int> cards;
  long long start, end;
  std::string who;
};

// Lines "<TASK_DEVICE> <start ns> <end ns> <who>".
std::vector<Use> read_uses(const fs::path& p) {
  std::vector<Use> out;
  std::istringstream in(read_file(p));
  std::string devices, who;
  long long a, b;
  while (in >> devices >> a >> b >> who) {
    Use u{{}, a, b, who};
    std::stringstream ds(devices);
    for (std::string id; std::getline(ds, id, ',');) u.cards.push_back(std::stoi(id));
    out.push_back(u);
  }
  return out;
}

std::string record(const fs::path& file, const std::string& who, const std::string& seconds) {
  return "s=$(date +%s%N); sleep " + seconds + "; echo \"$TASK_DEVICE $s $(date +%s%N) " + who + "\" >> " + file.string();
}

/// The daemon started on a project with one idle job: the leases are the only work.
void start_idle(Served& s) {
  write_project(s.dir, {{"idle.yml", "name: idle\nsteps:\n  - run: 'true'\n"}});
  s.start();
}

}  // namespace

TEST_CASE("task-submit: runs the command on leased cards and exits as task-submit does", "[lease]") {
  Served s;
  TaskSubmit ts;
  start_idle(s);
  const fs::path out = s.dir.path() / "out";
  CommandResult ok = run_cli({"task-submit", "--device-num", "2", "--run", "echo \"$TASK_DEVICE $TASKQUEUE_TASK_ID {}\" > " + out.string() + "; exit 7"},
                             client_env(s, ts));
  CHECK(ok.exit_code == 7);  // the command's own code
  std::string seen = read_file(out);
  CHECK(seen.rfind("0,1 lease-", 0) == 0);
  CHECK(seen.find(" 0,1\n") != std::string::npos);  // {} is the card ids
  // Through the symlink, by the incumbent's name.
  std::string link_out;
  CHECK(sh("PTO_RUNNER_SERVER=" + s.url() + " PTO_RUNNER_TOKEN=" + s.token + " " + ts.bin() + " --device 1 --run 'exit 3'", &link_out) == 3);
  // Killed at --max-time: 137; no such card: 126; every card busy past --timeout: 1.
  CHECK(task_submit(s, ts, {"--max-time", "1", "--run", "sleep 30"}).exit_code == 137);
  CommandResult none = task_submit(s, ts, {"--device", "9", "--run", "true"});  // card 9, not 9 cards
  CHECK(none.exit_code == 126);
  CHECK(none.err.find("device-ids: no card 9 on this host") != std::string::npos);
  Spawned holder = spawn_cli({"task-submit", "--device-num", "2", "--run", "sleep 30"}, client_env(s, ts));
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices_by_state"].value("busy", 0) == 2; }, 10));
  REQUIRE(pid_running(holder.pid));
  CommandResult late = task_submit(s, ts, {"--timeout", "1", "--run", "true"});
  CHECK(late.exit_code == 1);
  // As the incumbent: nothing on either stream (pypto's harness reads that as "no card within --timeout").
  CHECK(late.out.empty());
  CHECK(late.err.empty());
  // A lease shows in the status with its holder label, and its client's SIGTERM ends it (143).
  json st = s.get(api_path::kStatus);
  REQUIRE(st["leases"].size() == 1);
  CHECK(st["leases"][0]["label"] == "sleep 30");
  CHECK(st["devices"][0]["holder"]["label"].get<std::string>().rfind("lease lease-", 0) == 0);
  ::kill(holder.pid, SIGTERM);
  CHECK(wait_cli(holder).exit_code == 143);
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["state"] == "free"; }, 10));
}

TEST_CASE("task-submit: a command whose shell cannot be started is refused (126) with the reason, its lease given back, nothing of it left", "[lease]") {
  Served s;
  TaskSubmit ts;
  start_idle(s);
  // An executable `bash` first on PATH that is no program: the exec fails in the child (started with vfork
  // semantics, the client waiting), which reports its errno on a close-on-exec pipe for the client to read.
  const fs::path fake = ts.dir.path() / "bash";
  std::ofstream(fake) << "not a program\n";
  fs::permissions(fake, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  CommandResult r = task_submit(s, ts, {"--device", "0", "--run", "echo never"});
  CHECK(r.exit_code == 126);
  CHECK(r.err.find("cannot start bash") != std::string::npos);
  CHECK(r.out.find("never") == std::string::npos);
  // Given back at once (the client released it, no heartbeat timeout): card 0 free, no lease left.
  json st = s.get(api_path::kStatus);
  CHECK(st["leases"].empty());
  CHECK(st["devices_by_state"].value("busy", 0) == 0);
  // With a real shell again, the same card is leased and the command runs.
  fs::remove(fake);
  CHECK(task_submit(s, ts, {"--device", "0", "--run", "exit 4"}).exit_code == 4);
}

TEST_CASE("task-submit: the command's stdout and stderr reach the caller unchanged, and a lease whose command names a card fault charges that card", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.devices = "0-3";
  s.dir.write("runner.yml", "health:\n  fault-patterns:\n    - {pattern: '507018', cause: card}\n");
  start_idle(s);
  // 200,000 lines through the tap, each stream to its own place, in order, none lost.
  CommandResult big = task_submit(s, ts, {"--device", "0", "--run", "seq 200000; echo to-stderr >&2; printf 'no newline'"});
  CHECK(big.exit_code == 0);
  CHECK(big.err == "to-stderr\n");
  CHECK(big.out.size() == 1288895 + 10);
  CHECK(big.out.rfind("199999\n200000\nno newline") == big.out.size() - 24);
  CHECK(s.get(api_path::kStatus)["devices"][0]["health"]["state"] == "good");  // a passing lease charges nothing
  // An operator's lease (no run) whose command fails on card 1 with a card fault: card 1 is charged, with
  // the lease as the "run" its evidence names; the command's own exit code is kept.
  CommandResult wedged = task_submit(s, ts, {"--device", "1", "--run", "echo 'aclrtSynchronizeStream failed: 507018'; exit 5"});
  CHECK(wedged.exit_code == 5);
  CHECK(wedged.out == "aclrtSynchronizeStream failed: 507018\n");
  json card1 = s.get(api_path::kStatus)["devices"][1]["health"];
  CHECK(card1["state"] == "suspect");
  REQUIRE(card1["evidence"].size() == 1);
  CHECK(card1["evidence"][0].get<std::string>().rfind("lease-", 0) == 0);
  CHECK(card1["evidence"][0].get<std::string>().find(": 507018") != std::string::npos);
  // The same failure without the fault pattern is the command's, and charges nothing.
  CHECK(task_submit(s, ts, {"--device", "2", "--run", "echo AssertionError; exit 1"}).exit_code == 1);
  CHECK(s.get(api_path::kStatus)["devices"][2]["health"]["state"] == "good");
  CHECK(pto::api_request("GET", s.url(api_path::kMetrics)).body.find("pto_runner_failures_total{cause=\"card\"} 1") != std::string::npos);
}

TEST_CASE("leases and steps share one queue: 200 task-submit clients and a run on 8 cards in pairs, no card shared", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.devices = "8";
  s.device_groups = "0,1;2,3;4,5;6,7";
  const fs::path uses = s.dir.path() / "uses";
  std::string steps = "name: mixed\nparallel: true\nsteps:\n";
  for (int i = 0; i < 16; ++i)
    steps += "  - {name: s" + std::to_string(i) + ", devices: " + (i % 3 == 0 ? "2" : "1") + ", run: '" +
             record(uses, "step" + std::to_string(i), "0.1") + "'}\n";
  write_project(s.dir, {{"mixed.yml", steps}});
  // 200 clients of one user waiting at once on the public port: more than one client's default share of it.
  s.dir.write("runner.yml", "max-connections-per-client: 256\n");
  s.start();
  auto r = s.post(api_path::kRuns, json::object());
  REQUIRE(r.status == 201);
  std::vector<Spawned> clients;
  for (int i = 0; i < 200; ++i)
    clients.push_back(spawn_cli({"task-submit", "--device-num", i % 4 == 0 ? "2" : "1", "--timeout", "0", "--run",
                                 record(uses, "lease" + std::to_string(i), "0.05")},
                                client_env(s, ts)));
  int failed = 0;
  for (auto& c : clients) failed += wait_cli(c).exit_code != 0;
  CHECK(failed == 0);
  CHECK(s.wait_run(json::parse(r.body)["id"], 120)["state"] == "succeeded");
  auto all = read_uses(uses);
  REQUIRE(all.size() == 216);
  std::map<int, std::vector<std::pair<long long, long long>>> by_card;
  for (const auto& u : all) {
    if (u.cards.size() == 2) CHECK((u.cards[0] % 2 == 0 && u.cards[1] == u.cards[0] + 1));  // one group
    for (int c : u.cards) by_card[c].push_back({u.start, u.end});
  }
  for (auto& [card, iv] : by_card) {
    std::sort(iv.begin(), iv.end());
    for (std::size_t i = 1; i < iv.size(); ++i) CHECK(iv[i].first >= iv[i - 1].second);  // never two at once
  }
  // The status is refreshed right after the last release (a read model, not read under the engine's feet).
  CHECK(wait_until([&] { return s.get(api_path::kStatus)["leases"].empty(); }, 5));
}

TEST_CASE("leases: a 2-card lease is never starved by 1-card leases submitted after it", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.device_groups = "0,1";
  const fs::path uses = s.dir.path() / "uses";
  start_idle(s);
  // Card 0 is held until the test lets go (not for a fixed time: on a slow machine the singles' clients could
  // take longer to start than a sleep lasts, and the queue would be looked at too late).
  const fs::path release = s.dir.path() / "release";
  Spawned first = spawn_cli({"task-submit", "--device", "0", "--run", "while [ ! -e " + release.string() + " ]; do sleep 0.05; done"},
                            client_env(s, ts));
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["state"] == "busy"; }, 10));
  Spawned pair = spawn_cli({"task-submit", "--device-num", "2", "--run", record(uses, "pair", "0.2")}, client_env(s, ts));
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["queue"].size() == 1; }, 10));
  std::vector<Spawned> singles;
  for (int i = 0; i < 8; ++i) {
    singles.push_back(spawn_cli({"task-submit", "--device-num", "1", "--run", record(uses, "single" + std::to_string(i), "0.2")},
                                client_env(s, ts)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["queue"].size() == 9; }, 30));  // every single queued behind
  json st = s.get(api_path::kStatus);
  CHECK(st["queue"][0]["reason"].get<std::string>().find("waiting for 2 cards in one group") == 0);
  CHECK(st["devices"][1]["state"] == "reserved");  // the free card waits for the pair, not for a single
  std::ofstream(release) << "";
  CHECK(wait_cli(first).exit_code == 0);
  CHECK(wait_cli(pair).exit_code == 0);
  for (auto& c : singles) CHECK(wait_cli(c).exit_code == 0);
  long long pair_start = 0;
  std::vector<long long> single_starts;
  for (const auto& u : read_uses(uses)) {
    if (u.who == "pair") pair_start = u.start;
    else single_starts.push_back(u.start);
  }
  REQUIRE(single_starts.size() == 8);
  for (long long t : single_starts) CHECK(t > pair_start);
}

TEST_CASE("leases: a killed client's cards come back within seconds and its command is killed", "[lease]") {
  Served s;
  TaskSubmit ts;
  start_idle(s);
  const fs::path pidfile = s.dir.path() / "cmd.pid";
  Spawned c = spawn_cli({"task-submit", "--device", "1", "--run", "echo $$ > " + pidfile.string() + "; sleep 1000"}, client_env(s, ts));
  REQUIRE(wait_for_content(pidfile, 10));
  int cmd = std::stoi(read_file(pidfile));
  // The status is a read model refreshed after transitions (within 100 ms): see the grant before the kill.
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][1]["state"] == "busy"; }, 5));
  ::kill(c.pid, SIGKILL);
  wait_cli(c);
  CHECK(pid_running(cmd));  // the command outlives its client for now...
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][1]["state"] == "free"; }, 15));
  CHECK_FALSE(pid_running(cmd));  // ...until the lease is revoked
  CHECK(s.get(api_path::kStatus)["leases"].empty());
}

TEST_CASE("leases: a step's task-submit uses its run's own token, and cancelling the run kills the leased command", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.env = {{"PTO_RUNNER_TOKEN", "admin-token-the-steps-must-not-see"}, {"PATH", ts.path_env()}};
  const fs::path out = s.dir.path() / "out", pidfile = s.dir.path() / "leased.pid";
  write_project(s.dir, {{"h.yml", "name: h\nsteps:\n  - run: |\n      env | grep -c '^PTO_RUNNER_TOKEN=' > " + out.string() +
                                      " || true\n      task-submit --device-num 1 --run 'echo $$ > " + pidfile.string() +
                                      "; sleep 1000'\n"}});
  s.start();
  std::string id = s.submit_run();
  REQUIRE(wait_for_content(pidfile, 10));
  CHECK(read_file(out) == "0\n");  // no admin token in the step's environment
  json st = s.get(api_path::kStatus);
  REQUIRE(st["leases"].size() == 1);
  CHECK(st["leases"][0]["run"] == id);  // charged to its run
  int leased = std::stoi(read_file(pidfile));
  REQUIRE(s.post(api_path::run_cancel(id), json::object()).status == 202);
  CHECK(s.wait_run(id)["state"] == "cancelled");
  REQUIRE(wait_until([&] { return !pid_running(leased); }, 15));
  CHECK(wait_until([&] { return s.get(api_path::kStatus)["leases"].empty(); }, 5));
  // A run's token is no admin token: it cannot submit runs.
  CHECK(s.post(api_path::kRuns, json::object(), "not-a-token").status == 401);
}

TEST_CASE("leases: a lease never outlives the step that asked for it, lasts at most what its timeout leaves, and a run "
          "holds at most max-cards-per-run cards by lease", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.env = {{"PATH", ts.path_env()}};
  s.dir.write("runner.yml", "max-cards-per-run: 1\n");
  const fs::path pidfile = s.dir.path() / "leased.pid", second = s.dir.path() / "second.out", seen = s.dir.path() / "seen";
  // The step starts a leased command in the background and ends; a second lease of the same run is over the cap.
  write_project(s.dir, {{"h.yml", "name: h\nsteps:\n  - timeout-minutes: 5\n    run: |\n"
                                  "      task-submit --device-num 1 --run 'echo $$ > " + pidfile.string() + "; sleep 1000' &\n"
                                  "      for i in $(seq 200); do [ -s " + pidfile.string() + " ] && break; sleep 0.05; done\n"
                                  "      task-submit --device-num 1 --run 'true' > " + second.string() + " 2>&1 || echo \"second refused $?\" >> " + second.string() + "\n"
                                  "      for i in $(seq 200); do [ -e " + seen.string() + " ] && break; sleep 0.05; done\n"}});
  s.start();
  std::string id = s.submit_run();
  REQUIRE(wait_for_content(pidfile, 20));
  json st;
  REQUIRE(wait_until([&] { st = s.get(api_path::kStatus); return st["leases"].size() == 1; }, 10));
  // Bounded by the step's timeout (5 min, less what has passed), though the client asked for no limit.
  const double max_seconds = st["leases"][0]["max_seconds"];
  CHECK(max_seconds > 200);
  CHECK(max_seconds <= 300);
  bool second_done = wait_until([&] { return read_file(second).find("second refused") != std::string::npos; }, 20);
  INFO(read_file(second) << read_file(s.proc.out) << read_file(s.proc.err));
  REQUIRE(second_done);
  CHECK(read_file(second).find("max-cards-per-run is 1") != std::string::npos);
  s.dir.write("seen", "1");
  // The step ended: its lease is revoked and the leased command killed, though the run is not over.
  const int leased = std::stoi(read_file(pidfile));
  CHECK(s.wait_run(id)["state"] == "succeeded");
  CHECK(wait_until([&] { return !pid_running(leased); }, 15));
  CHECK(wait_until([&] { return s.get(api_path::kStatus)["leases"].empty(); }, 5));
}

TEST_CASE("leases: with devices.lock-name the incumbent's lock files are honoured and named in the status", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.devices = "1";
  s.dir.write("runner.yml", "devices:\n  lock-name: npu_device_{id}.lock\n");
  start_idle(s);
  fs::create_directories(s.locks());
  const std::string lock = s.locks() + "/npu_device_0.lock";
  {
    std::ofstream(lock) << "pid=4242 user=ci\n";
  }
  int holder = fork();
  if (holder == 0) {
    // The `sleep` left behind keeps no pipe open (ctest's output, the test daemon's): ctest would wait for it.
    int null_fd = ::open("/dev/null", O_RDWR);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
    ::close_range(3, ~0U, 0);
    execlp("flock", "flock", "-o", lock.c_str(), "sleep", "30", (char*)nullptr);
    _exit(127);
  }
  REQUIRE(wait_until([&] { return sh("flock -n " + lock + " true") != 0; }, 10));
  const fs::path ran = s.dir.path() / "ran";
  Spawned c = spawn_cli({"task-submit", "--device-num", "1", "--run", "touch " + ran.string()}, client_env(s, ts));
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["state"] == "busy"; }, 10));
  json dev = s.get(api_path::kStatus)["devices"][0];
  CHECK(dev["holder"]["other_program"] == true);
  CHECK(dev["holder"]["label"] == "another program holds " + lock + " (pid=4242 user=ci)");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(fs::exists(ran));  // never handed out while the other program holds it
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  CHECK(wait_cli(c).exit_code == 0);
  CHECK(fs::exists(ran));
}

namespace {

/// A process outside pto-runner (the incumbent's wrapper, a detached leftover of its task), its output dropped.
int spawn_outside(const std::vector<std::string>& argv) {
  int pid = fork();
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDWR);
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
    ::close_range(3, ~0U, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("beside the incumbent: a card whose flock another program holds and one whose device file an outside "
          "process has open are both named in the status and handed out only once released, and a busy card's lock "
          "file reads pid=", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.devices = "2";
  const fs::path dev = s.dir.path() / "dev";
  fs::create_directories(dev);
  for (int i = 0; i < 2; ++i) std::ofstream(dev / ("davinci" + std::to_string(i))) << "";  // stand-ins for /dev/davinciN
  s.dir.write("runner.yml", "devices:\n  lock-name: npu_device_{id}.lock\n  card-files: " + (dev / "davinci{id}").string() + "\n");
  start_idle(s);
  fs::create_directories(s.locks());
  const std::string lock0 = s.locks() + "/npu_device_0.lock", lock1 = s.locks() + "/npu_device_1.lock";
  // The incumbent's wrapper holding card 0's flock, and a detached leftover of its task with card 1's file open.
  int flocker = spawn_outside({"flock", "-o", lock0, "sleep", "60"});
  int opener = spawn_outside({"sh", "-c", "exec 3<" + (dev / "davinci1").string() + "; exec sleep 60"});
  REQUIRE(wait_until([&] { return sh("flock -n " + lock0 + " true") != 0; }, 10));
  REQUIRE(wait_until([&] { return sh("ls -l /proc/" + std::to_string(opener) + "/fd | grep -q davinci1") == 0; }, 10));
  const fs::path ran = s.dir.path() / "ran";
  Spawned c = spawn_cli({"task-submit", "--device-num", "1", "--run", "echo $TASK_DEVICE > " + ran.string() + "; cat " + lock1 + " > " +
                                                                         ran.string() + ".lock; sleep 1"},
                        client_env(s, ts));
  json st;
  REQUIRE(wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["devices"][0]["state"] == "busy" && st["devices"][1]["state"] == "busy";
  }, 10));
  INFO(st.dump());
  CHECK(st["devices"][0]["holder"]["other_program"] == true);
  CHECK(st["devices"][0]["holder"]["label"].get<std::string>().find("another program holds " + lock0) == 0);
  CHECK(st["devices"][1]["holder"]["other_program"] == true);
  CHECK(st["devices"][1]["holder"]["label"] == "pid " + std::to_string(opener) + " (sleep) has " + (dev / "davinci1").string() + " open");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(fs::exists(ran));  // neither card handed out meanwhile
  ::kill(opener, SIGKILL);  // the leftover ends: card 1 comes free (the lock of card 0 is still held)
  ::waitpid(opener, nullptr, 0);
  CHECK(wait_cli(c).exit_code == 0);
  CHECK(read_file(ran) == "1\n");
  // While the lease held card 1, its lock file named the holder as the incumbent's readers parse it.
  CHECK(read_file(ran.string() + ".lock").rfind("pid=" + std::to_string(s.proc.pid) + " ", 0) == 0);
  ::kill(flocker, SIGKILL);
  ::waitpid(flocker, nullptr, 0);
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["state"] == "free"; }, 10));
}

TEST_CASE("beside the incumbent: at idle, with nothing asking for cards, the status names a card another program has "
          "flocked and a card whose file an outside process has open, and shows them free once released",
          "[lease]") {
  Served s;
  s.devices = "3";
  const fs::path dev = s.dir.path() / "dev";
  fs::create_directories(dev);
  for (int i = 0; i < 3; ++i) std::ofstream(dev / ("davinci" + std::to_string(i))) << "";
  s.dir.write("runner.yml", "devices:\n  lock-name: npu_device_{id}.lock\n  card-files: " + (dev / "davinci{id}").string() + "\n");
  start_idle(s);
  fs::create_directories(s.locks());
  const std::string lock0 = s.locks() + "/npu_device_0.lock";
  std::ofstream(lock0) << "pid=4242 user=ci\n";
  int flocker = spawn_outside({"flock", "-o", lock0, "sleep", "60"});
  int opener = spawn_outside({"sh", "-c", "exec 3<" + (dev / "davinci2").string() + "; exec sleep 60"});
  REQUIRE(wait_until([&] { return sh("flock -n " + lock0 + " true") != 0; }, 10));
  json st;
  REQUIRE(wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["devices"][0]["state"] == "busy" && st["devices"][2]["state"] == "busy";
  }, 20));
  INFO(st.dump());
  CHECK(st["devices"][0]["holder"]["other_program"] == true);
  CHECK(st["devices"][0]["holder"]["label"] == "another program holds " + lock0 + " (pid=4242 user=ci)");
  CHECK(st["devices"][1]["state"] == "free");
  CHECK(st["devices"][2]["holder"]["label"] == "pid " + std::to_string(opener) + " (sleep) has " + (dev / "davinci2").string() + " open");
  for (int pid : {flocker, opener}) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  REQUIRE(wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["devices"][0]["state"] == "free" && st["devices"][2]["state"] == "free";
  }, 20));
}

TEST_CASE("leases: what a leased command started with `setsid env -i` is gone, and its card free, when task-submit exits, also at --max-time (cgroup)", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.dir.write("runner.yml", "kill-grace-seconds: 1\n");
  start_idle(s);
  if (s.get(api_path::kStatus)["containment"] != "cgroup") {
    WARN("SKIPPED: no writable cgroup v2 with cgroup.kill here; a lease's escapee that scrubs its environment "
         "is out of the marker sweep's reach (docs/choices.md: Processes)");
    return;
  }
  const fs::path pidfile = s.dir.path() / "escapee";
  // It waits until the escapee has escaped (its environment is empty once `env -i` exec'd sleep): otherwise the
  // client's kill of the command's group could catch it before setsid() and the test would prove nothing.
  CommandResult r = task_submit(s, ts, {"--run", "setsid env -i sleep 1000 > /dev/null 2>&1 & echo $! > " + pidfile.string() +
                                                     "; while [ -n \"$(tr -d '\\0' < /proc/$!/environ)\" ]; do sleep 0.05; done"});
  CHECK(r.exit_code == 0);
  auto gone = [](int pid) {
    return !fs::exists("/proc/" + std::to_string(pid)) || read_file("/proc/" + std::to_string(pid) + "/stat").find(") Z") != std::string::npos;
  };
  // The client's release is answered once the escapee is gone and the card free: when task-submit has
  // exited, nothing of its command is left (no waiting here).
  CHECK(gone(std::stoi(read_file(pidfile))));
  CHECK(s.get(api_path::kStatus)["devices"][0]["state"] == "free");
  // Likewise for a command killed at --max-time (exit 137), whose escapee ignores SIGTERM.
  fs::remove(pidfile);
  CommandResult killed = task_submit(s, ts, {"--max-time", "2", "--run",
      "setsid env -i sh -c 'trap \"\" TERM; exec sleep 1000' > /dev/null 2>&1 & echo $! > " + pidfile.string() +
      "; while [ -n \"$(tr -d '\\0' < /proc/$!/environ)\" ]; do sleep 0.05; done; sleep 30"});
  CHECK(killed.exit_code == 137);
  REQUIRE(fs::exists(pidfile));
  CHECK(gone(std::stoi(read_file(pidfile))));
  CHECK(s.get(api_path::kStatus)["devices"][0]["state"] == "free");
}

TEST_CASE("leases: a step's device-type is its task-submit leases' type, and --device-type asks for one", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.devices = "";  // runner.yml's cards: a2a3 0-3, a5 4-5
  s.dir.write("runner.yml", "devices:\n  ids: [0, 1, 2, 3, 4, 5]\n  types: {a2a3: [0, 1, 2, 3], a5: [4, 5]}\n");
  s.env = {{"PATH", ts.path_env()}};
  const fs::path out = s.dir.path() / "cards";
  // A harness step holds no card and borrows each batch's card itself (pypto's --execute-via-task-submit).
  write_project(s.dir, {{"h.yml", "name: h\nsteps:\n  - device-type: a5\n    run: |\n      for i in 1 2 3 4 5 6; do task-submit "
                                  "--device-num 1 --run 'echo $TASK_DEVICE >> " + out.string() + "'; done\n"}});
  s.start();
  auto r = s.post(api_path::kRuns, json::object());
  REQUIRE(r.status == 201);
  CHECK(s.wait_run(json::parse(r.body)["id"])["state"] == "succeeded");
  std::istringstream in(read_file(out));
  int n = 0;
  for (int card; in >> card; ++n) CHECK((card == 4 || card == 5));
  CHECK(n == 6);
  // Outside a step, the flag: a type no card has is refused (126), an a2a3 lease gets an a2a3 card.
  CommandResult none = task_submit(s, ts, {"--device-type", "a9", "--run", "true"});
  CHECK(none.exit_code == 126);
  INFO(none.err);
  CHECK(none.err.find("card of type a9") != std::string::npos);
  CommandResult a2a3 = task_submit(s, ts, {"--device-type", "a2a3", "--run", "echo $TASK_DEVICE"});
  CHECK(a2a3.exit_code == 0);
  CHECK(std::stoi(a2a3.out) < 4);
}

TEST_CASE("run: a step's task-submit leases from the run's own queue and SIGINT of the run kills the leased command", "[lease]") {
  TempDir d;
  TaskSubmit ts;
  const fs::path rec = d.path() / "rec", pidfile = d.path() / "leased.pid";
  // One card, which the step (holding none itself) borrows through task-submit.
  write_project(d, {{"h.yml", "name: h\nsteps:\n  - run: task-submit --device-num 1 --run 'echo $TASK_DEVICE > " + rec.string() +
                                  "; echo $$ > " + pidfile.string() + "; sleep 1000'\n"}});
  Spawned p = spawn_cli({"run", "--root", d.str(), "--devices", "1", "--lock-dir", (d.path() / "locks").string(), "--state-dir",
                         (d.path() / "state").string()},
                        {{"PATH", ts.path_env()}, {"PTO_RUNNER_SERVER", "http://127.0.0.1:9"}, {"PTO_RUNNER_TOKEN", "an-admin-token"}});
  REQUIRE(wait_for_content(pidfile, 20));
  CHECK(read_file(rec) == "0\n");  // granted by the run (the inherited PTO_RUNNER_SERVER is not what steps see)
  int leased = std::stoi(read_file(pidfile));
  ::kill(p.pid, SIGINT);
  CommandResult r = wait_cli(p);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 130);
  CHECK(wait_until([&] { return !pid_running(leased); }, 10));
}

TEST_CASE("leases: a lease's end is in the cards' history after a SIGUSR2 hand-over and after SIGKILL once its batch is written", "[lease]") {
  Served s;
  s.devices = "1";
  start_idle(s);
  auto lease = [&](const std::string& label) {
    auto r = s.post(api_path::kLeases, {{"devices", 1}, {"label", label}});
    REQUIRE(r.status == 201);
    const std::string id = json::parse(r.body)["id"];
    REQUIRE(pto::api_request("DELETE", s.url(api_path::lease(id)), s.token, "").status == 200);
    return id;
  };
  auto in_history = [&](const std::string& id) {
    const json cards = s.get(api_path::kCards);
    UNSCOPED_INFO(cards.dump());
    for (const auto& e : cards["events"])
      if (e.value("label", "").find(id) != std::string::npos) return true;
    return false;
  };
  // Ended just before the hand-over: its card event waits for its batch, and the hand-over writes it.
  const std::string handed = lease("before the hand-over");
  CHECK(wait_until([&] { return in_history(handed); }, 5));  // the read model has it at its next refresh
  s.stop(SIGUSR2);
  s.start();
  CHECK(in_history(handed));
  // Ended, then its batch written (the journal has its row), then SIGKILL: kept too.
  const std::string killed = lease("before a SIGKILL");
  CHECK(wait_until([&] {
    auto journal = pto::Journal::open_readonly(pto::journal_file(s.state()));
    if (journal)
      for (const auto& [card, data] : journal->card_events(0))
        if (data.value("label", "").find(killed) != std::string::npos) return true;
    return false;
  }, 5));
  s.stop(SIGKILL);
  s.start();
  CHECK(in_history(handed));
  CHECK(in_history(killed));
}

TEST_CASE("leases: the daemon revokes a lease past its max-seconds even while its client heartbeats, and --list --find --kill work", "[lease]") {
  Served s;
  TaskSubmit ts;
  s.devices = "1";
  start_idle(s);
  // A client that heartbeats but never ends (its own --max-time is not what stops it here).
  auto r = s.post(api_path::kLeases, {{"devices", 1}, {"max-seconds", 1}, {"label", "overstays"}});
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"];
  int revoked_status = 0;
  CHECK(wait_until([&] {
    revoked_status = s.post(api_path::lease_heartbeat(id), json::object()).status;
    return revoked_status == 410;
  }, 10));
  CHECK(wait_until([&] { return s.get(api_path::kStatus)["leases"].empty(); }, 5));
  CHECK(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["state"] == "free"; }, 5));
  // The incumbent's listing, search and kill.
  const fs::path pidfile = s.dir.path() / "leased.pid";
  Spawned client = spawn_cli({"task-submit", "--device-num", "1", "--max-time", "0", "--run", "echo $$ > " + pidfile.string() + "; sleep 1000"},
                             client_env(s, ts));
  REQUIRE(wait_for_content(pidfile, 10));
  CommandResult list = task_submit(s, ts, {"--list"});
  CHECK(list.exit_code == 0);
  CHECK(list.out.find("sleep 1000") != std::string::npos);
  CommandResult find = task_submit(s, ts, {"--find", "sleep 1000"});
  REQUIRE(find.exit_code == 0);
  std::string lease = find.out.substr(0, find.out.find('\n'));
  CHECK(lease.rfind("lease-", 0) == 0);
  CommandResult kill = task_submit(s, ts, {"--kill", lease});
  CHECK(kill.exit_code == 0);
  CommandResult ended = wait_cli(client);
  CHECK(ended.exit_code == 137);  // revoked: as task-submit's killed command
  CHECK(wait_until([&] { return !pid_running(std::stoi(read_file(pidfile))); }, 10));
}

TEST_CASE("run's own lease endpoints: the run's token only, and closing them revokes what runs under a lease", "[lease]") {
  TempDir d;
  pto::RunnerConfig cfg;
  cfg.device_ids = {0};
  cfg.lock_dir = (d.path() / "locks").string();
  cfg.state_dir = (d.path() / "state").string();
  cfg.kill_grace_seconds = 1;
  boost::asio::io_context io;
  std::string error;
  auto host = pto::wire_host(io, cfg, pto::HostOptions{}, error);
  REQUIRE(host);
  pto::LeaseEndpoint leases(io, *host, cfg.kill_grace_seconds);
  const std::string run_token = "the-run-s-token";
  leases.access().add_run_token(run_token, "run-1");
  REQUIRE(leases.start().empty());
  auto guard = boost::asio::make_work_guard(io);
  std::thread loop([&] { io.run(); });
  const std::string url = leases.url() + api_path::kLeases;
  CHECK(pto::api_request("POST", url, "not-the-run-token", "{}").status == 401);
  auto granted = pto::api_request("POST", url, run_token, json({{"devices", 1}, {"label", "held"}}).dump());
  REQUIRE(granted.status == 201);
  json lease = json::parse(granted.body);
  CHECK(lease["cards"] == json::array({0}));
  // What the lease's client would run, carrying the lease's marker.
  int pid = fork();
  if (pid == 0) {
    ::setenv("PTO_RUNNER_STEP_MARK", lease["marker"].get<std::string>().c_str(), 1);
    execlp("sleep", "sleep", "1000", (char*)nullptr);
    _exit(127);
  }
  struct Reap {  // whatever happens, no `sleep` outlives the test (it would hold ctest's output pipe)
    int pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, WNOHANG);
    }
  } reap{pid};
  // Running under the lease once exec'd (before that, /proc shows the test's own environment).
  REQUIRE(wait_until([&] {
    return read_file("/proc/" + std::to_string(pid) + "/environ").find(lease["marker"].get<std::string>()) != std::string::npos;
  }, 10));
  // Its client heartbeats, so only closing can end it.
  const std::string beat = url + "/" + lease["id"].get<std::string>() + "/heartbeat";
  CHECK(pto::api_request("POST", beat, run_token, "{}").status == 200);
  boost::asio::post(io, [&] { leases.close("its run ended"); });
  int status = 0;
  CHECK(wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 10));
  CHECK(WIFSIGNALED(status));
  std::promise<std::map<std::string, long long>> counted;  // read on the loop's thread, where the book lives
  boost::asio::post(io, [&] { counted.set_value(leases.ended_by_reason()); });
  auto reasons = counted.get_future();
  REQUIRE(reasons.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  const auto ended = reasons.get();
  CHECK(ended.count("daemon stopping") == 1);  // revoked by the close, not by a missed heartbeat
  CHECK(ended.count("heartbeat") == 0);
  CHECK_FALSE(pto::api_request("POST", url, run_token, "{}").reached);  // nothing listens any more
  guard.reset();
  io.stop();
  loop.join();
}
