// The daemon under faults: a full disk, a damaged or lost journal, a 100 MB line in a log, wrong kinds of token
// file, a second daemon on one state dir. It keeps serving, says what failed and where, and loses nothing.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "read_model/finished_texts.h"
#include "served_daemon.h"
#include "test_support.h"
#include "util/api_paths.h"
#include "util/state_paths.h"

using namespace pto::test;

namespace {

long rss_kb(int pid, const char* field = "VmHWM:") {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  return -1;
}

/// A small tmpfs, for a disk that fills up. Tests that need one skip loudly when it cannot be mounted.
struct SmallDisk {
  TempDir dir;
  bool mounted = false;
  explicit SmallDisk(const char* size) {
    mounted = ::mount("tmpfs", dir.str().c_str(), "tmpfs", 0, (std::string("size=") + size).c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted) ::umount2(dir.str().c_str(), MNT_DETACH);
  }
};

}  // namespace

TEST_CASE("faults: a full disk ends the run with an infrastructure error naming the path, the daemon keeps serving "
          "and recovers when space returns, serve on a full disk exits 3", "[faults]") {
  SmallDisk disk("4m");
  if (!disk.mounted) {
    WARN("SKIPPED: cannot mount a tmpfs here (needs root): the full-disk test did not run");
    return;
  }
  Served s;
  const std::string state = (disk.dir.path() / "state").string();
  const std::string fill = (disk.dir.path() / "fill").string();
  write_project(s.dir, {{"fill.yml", "name: fill\nsteps:\n  - run: 'dd if=/dev/zero of=" + fill +
                                         " bs=64k 2>/dev/null || true; for i in $(seq 1 200); do echo line $i; done'\n"
                                         "  - run: 'echo after'\n"},
                        {"ok.yml", "name: ok\nsteps:\n  - run: 'echo fine'\n"}});
  s.state_dir = state;
  s.start();
  std::string id = s.submit_run({{"jobs", {"fill"}}});
  json run = s.wait_run(id, 60);
  CHECK(run["state"] == "failed");
  CHECK(run["result"] == 3);
  std::string problems = run["infrastructure_problems"].dump();
  CHECK((problems.find(state + "/journal.sqlite cannot be written") != std::string::npos ||
         problems.find("cannot write " + pto::run_dir(state, id)) != std::string::npos));
  CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).status == 200);
  // Meanwhile a daemon on another disk is unaffected.
  Served other;
  write_project(other.dir, {{"ok.yml", "name: ok\nsteps:\n  - run: 'echo fine'\n"}});
  other.start();
  auto o = other.post(api_path::kRuns, json::object());
  CHECK(other.wait_run(json::parse(o.body)["id"])["state"] == "succeeded");
  // serve on the full disk: exit 3, the path named.
  CommandResult full = run_cli({"serve", "--root", s.dir.str(), "--listen", "127.0.0.1:0", "--state-dir",
                                (disk.dir.path() / "state2").string(), "--lock-dir", s.locks()});
  CHECK(full.exit_code == 3);
  CHECK(full.err.find((disk.dir.path() / "state2").string()) != std::string::npos);
  // Space comes back: the next run succeeds without a restart, and the failed one is still there.
  fs::remove(fill);
  auto again = s.post(api_path::kRuns, {{"jobs", {"ok"}}});
  REQUIRE(again.status == 201);
  CHECK(s.wait_run(json::parse(again.body)["id"])["state"] == "succeeded");
  CHECK(s.get(api_path::run(id))["result"] == 3);
  CHECK(read_file(s.proc.err).find("cannot be written") != std::string::npos);
}

namespace {

// A daemon's history with a succeeded and a failed run, stopped cleanly.
struct History {
  Served s;
  json runs, records;
  History() {
    write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - run: 'echo one'\n  - run: 'echo two; exit 4'\n"},
                          {"b.yml", "name: b\nsteps:\n  - run: 'echo fine'\n"}});
    s.start();
    for (const char* job : {"a", "b"}) {
      auto r = s.post(api_path::kRuns, {{"jobs", {job}}});
      REQUIRE(r.status == 201);
      s.wait_run(json::parse(r.body)["id"]);
    }
    runs = s.get(api_path::kRuns)["runs"];
    for (const auto& r : runs) records[r["id"].get<std::string>()] = s.get(api_path::run(r["id"].get<std::string>()));
    s.stop();
  }
  std::string journal() const { return s.state() + "/journal.sqlite"; }
  CommandResult serve_once(std::vector<std::string> extra = {}) {
    // Starts, reports and stops (SIGTERM once listening); the output tells how it went.
    std::vector<std::string> args = {"serve", "--root", s.dir.str(), "--listen", "127.0.0.1:0", "--state-dir", s.state(),
                                     "--lock-dir", s.locks()};
    args.insert(args.end(), extra.begin(), extra.end());
    Spawned p = spawn_cli(args);
    wait_until([&] { return read_file(p.out).find("listening on") != std::string::npos || !pid_running(p.pid); }, 20);
    if (pid_running(p.pid)) {
      s.proc = p;
      std::string out = read_file(p.out);
      s.port = std::stoi(out.substr(out.find("127.0.0.1:") + 10));
      return {0, out, read_file(p.err)};
    }
    return wait_cli(p);
  }
  void expect_same_history() {
    CHECK(s.get(api_path::kRuns)["runs"] == runs);
    for (const auto& [id, rec] : records.items()) CHECK(s.get(api_path::run(id)) == rec);
    s.stop();
  }
};

void overwrite(const std::string& path, long offset, std::size_t n) {
  int fd = ::open(path.c_str(), O_WRONLY);
  std::string garbage(n, '\x5a');
  REQUIRE(::pwrite(fd, garbage.data(), n, offset) == static_cast<ssize_t>(n));
  ::close(fd);
}

}  // namespace

TEST_CASE("faults: a damaged journal stops serve with exit 3 naming it, --rebuild-journal restores the same history", "[faults]") {
  for (const char* damage : {"truncated", "garbage header", "garbage page"}) {
    History h;
    INFO(damage);
    long size = static_cast<long>(fs::file_size(h.journal()));
    if (std::string(damage) == "truncated") fs::resize_file(h.journal(), static_cast<std::uintmax_t>(size / 2));
    else if (std::string(damage) == "garbage header") overwrite(h.journal(), 0, 100);
    else overwrite(h.journal(), (size / 4096 / 2) * 4096, 4096);
    CommandResult r = h.serve_once();
    CHECK(r.exit_code == 3);
    CHECK(r.err.find(h.journal()) != std::string::npos);
    CHECK(r.err.find("pto-runner serve --rebuild-journal") != std::string::npos);
    CommandResult rebuilt = h.serve_once({"--rebuild-journal"});
    REQUIRE(rebuilt.exit_code == 0);
    h.expect_same_history();
  }
}

TEST_CASE("faults: a run record and a journal that go bad while the daemon serves are answered with 503 and an "
          "infrastructure failure, and the daemon stays up", "[faults]") {
  Served s;
  write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - run: 'echo hi'\n"}});
  s.start();
  auto r = s.post(api_path::kRuns, json::object());
  std::string id = json::parse(r.body)["id"];
  REQUIRE(s.wait_run(id)["state"] == "succeeded");
  // The last runs to end are answered from memory (read_model/finished_texts): four later ones push it out.
  for (std::size_t k = 0; k < pto::FinishedTexts::kKept; ++k) REQUIRE(s.wait_run(s.submit_run())["state"] == "succeeded");
  // The run's own record is gone and the journal's table with it (another program, a bad page). A GET reads
  // the record, never the journal: the run is listed, so its missing record is the host's problem (503). It
  // used to throw on the engine thread and abort the daemon.
  fs::remove(fs::path(s.state()) / "runs" / id / "run.json");
  REQUIRE(sh("python3 -c \"import sqlite3; c = sqlite3.connect('" + s.state() + "/journal.sqlite'); "
             "c.execute('DROP TABLE runs'); c.commit()\"") == 0);
  auto run = pto::api_request("GET", s.url(api_path::run(id)));
  CHECK(run.status == 503);
  CHECK(run.body.find("cannot be read now") != std::string::npos);
  CHECK(pto::api_request("GET", s.url(api_path::step_log(id, "1-1"))).status == 503);
  CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).status == 200);
  CHECK(pid_running(s.proc.pid));
  // The next run cannot be journaled: it ends as an infrastructure failure, and the daemon goes on serving.
  std::string next = s.submit_run();
  CHECK(s.wait_run(next)["result"] == 3);
  CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).status == 200);
  CHECK(pid_running(s.proc.pid));
}

TEST_CASE("faults: an empty or deleted journal beside run directories is rebuilt, said loudly", "[faults]") {
  for (bool deleted : {false, true}) {
    History h;
    if (deleted) fs::remove(h.journal());
    else fs::resize_file(h.journal(), 0);
    CommandResult r = h.serve_once();
    REQUIRE(r.exit_code == 0);
    CHECK(read_file(h.s.proc.err).find("rebuilt 2 run(s) from the run directories") != std::string::npos);
    h.expect_same_history();
  }
}

TEST_CASE("faults: a run killed with its daemon before any job ended is in the history rebuilt without the journal", "[faults]") {
  Served s;
  const std::string started = (s.dir.path() / "started").string();
  write_project(s.dir, {{"slow.yml", "name: slow\nsteps:\n  - run: 'touch " + started + "; sleep 1000'\n"}});
  s.start();
  auto r = s.post(api_path::kRuns, json::object());
  std::string id = json::parse(r.body)["id"];
  REQUIRE(wait_until([&] { return fs::exists(started); }, 10));
  ::kill(s.proc.pid, SIGKILL);  // no job has ended: only the record written at submission is beside the logs
  wait_cli(s.proc);
  s.proc.pid = -1;
  fs::remove(s.state() + "/journal.sqlite");
  s.start();
  json run = s.get(api_path::run(id));
  CHECK(run["state"] == "interrupted");
  CHECK(run["result"] == 3);
  CHECK(read_file(s.proc.err).find("rebuilt 1 run(s) from the run directories") != std::string::npos);
}

TEST_CASE("faults: a 100 MB line neither stalls the daemon nor its memory, and the log keeps its cap", "[faults]") {
  Served s;
  s.dir.write("runner.yml", "log-max-mb: 8\n");
  write_project(s.dir, {{"big.yml", "name: big\nsteps:\n  - run: 'head -c 100000000 /dev/zero | tr \"\\\\0\" x; echo; echo the end'\n"}});
  s.start();
  long before = rss_kb(s.proc.pid, "VmRSS:");
  auto r = s.post(api_path::kRuns, json::object());
  std::string id = json::parse(r.body)["id"];
  CHECK(s.wait_run(id, 120)["state"] == "succeeded");
  const std::string log = s.get(api_path::run(id))["jobs"][0]["steps"][0]["log_path"];
  CHECK(fs::file_size(log) <= (8u << 20) + 4096);
  std::string text = read_file(log);
  CHECK(text.find("bytes of output dropped here: the log is capped at 8388608 bytes (log-max-mb)") != std::string::npos);
  CHECK(text.substr(text.size() - 8) == "the end\n");
  // Tail requests of the long line while /healthz keeps answering at once.
  std::thread tails([&] {
    for (int i = 0; i < 5; ++i) pto::api_request("GET", s.url(api_path::step_log(id, "1-1") + "?tail=2"));
  });
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).status == 200);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  }
  tails.join();
  auto tail = pto::api_request("GET", s.url(api_path::step_log(id, "1-1") + "?tail=2"));
  CHECK(tail.body.size() <= (1u << 20) + 200);
  CHECK(tail.body.find("the end\n") != std::string::npos);
  CHECK(rss_kb(s.proc.pid) - before < 64 * 1024);  // the daemon never held the 100 MB
}

TEST_CASE("faults: a token file that is a FIFO, a directory or empty stops serve at once with its own message", "[faults]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: 'true'\n"}});
  REQUIRE(::mkfifo((d.path() / "fifo").c_str(), 0600) == 0);
  fs::create_directories(d.path() / "dir");
  d.write("empty", "");
  for (auto [file, says] : std::vector<std::pair<std::string, std::string>>{
           {"fifo", "is a FIFO (named pipe), not a file"}, {"dir", "is a directory, not a file"}, {"empty", "is empty"}}) {
    auto t0 = std::chrono::steady_clock::now();
    CommandResult r = run_cli({"serve", "--root", d.str(), "--listen", "127.0.0.1:0", "--state-dir", (d.path() / "state").string(),
                               "--lock-dir", (d.path() / "locks").string(), "--token-file", (d.path() / file).string()});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find((d.path() / file).string() + " " + says) != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
}

TEST_CASE("serve: a second daemon on one state dir exits 2 naming the first, whose running step finishes untouched", "[faults]") {
  Served s;
  const std::string done = (s.dir.path() / "done").string();
  write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - run: 'sleep 1; touch " + done + "'\n"}});
  s.start();
  auto r = s.post(api_path::kRuns, json::object());
  std::string id = json::parse(r.body)["id"];
  CommandResult second = run_cli({"serve", "--root", s.dir.str(), "--listen", "127.0.0.1:0", "--state-dir", s.state(),
                                  "--lock-dir", s.locks()});
  CHECK(second.exit_code == 2);
  CHECK(second.err.find("belongs to another pto-runner serve (pid " + std::to_string(s.proc.pid) + ",") != std::string::npos);
  CHECK(s.wait_run(id)["state"] == "succeeded");
  CHECK(fs::exists(done));
}

TEST_CASE("containment: a step's `setsid env -i` escapee is gone when the step ends (cgroup), and leaves no zombie", "[faults]") {
  Served s;
  const fs::path pidfile = s.dir.path() / "escapee";
  // The step waits until the escapee has escaped (empty environment once `env -i` exec'd sleep), so the
  // process-group kill cannot catch it first and make the test pass without containment.
  write_project(s.dir, {{"esc.yml", "name: esc\nsteps:\n  - run: 'setsid env -i sleep 1000 > /dev/null 2>&1 & echo $! > " +
                                        pidfile.string() + "; while [ -n \"$(tr -d ''\\0'' < /proc/$!/environ)\" ]; do sleep 0.05; done'\n"}});
  s.start();
  if (s.get(api_path::kStatus)["containment"] != "cgroup") {
    WARN("SKIPPED: no writable cgroup v2 with cgroup.kill here; the process-group + marker sweep cannot catch an escapee "
         "that scrubs its environment (docs/choices.md: Processes)");
    return;
  }
  auto r = s.post(api_path::kRuns, json::object());
  CHECK(s.wait_run(json::parse(r.body)["id"])["state"] == "succeeded");
  int pid = std::stoi(read_file(pidfile));
  // Not running, and not a zombie either: reaped by the daemon (a subreaper), not left for PID 1.
  CHECK(wait_until([&] { return !fs::exists("/proc/" + std::to_string(pid)); }, 5));
  std::string zombies;
  sh("ps -eo stat=,ppid= | awk '$1 ~ /^Z/ && $2 == " + std::to_string(s.proc.pid) + "' | wc -l", &zombies);
  CHECK(zombies == "0\n");
}
