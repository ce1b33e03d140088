// CPUs and memory beside the cards (SPEC "CPU steps beside card steps"): the scheduler's policy on fake
// hosts, then real runs on a host of `host: {cpus: 4}`: how many steps run at once, the cgroup's cpu quota
// and memory limit as the step itself reads them, a step over its memory, lint, and the daemon's status.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "sched/scheduler.h"
#include "served_daemon.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {

std::vector<SchedCard> free_cards(int n) {
  std::vector<SchedCard> out;
  for (int i = 0; i < n; ++i) out.push_back({i, true, true, "", 0, ""});
  return out;
}

SchedRequest cpu_step(std::uint64_t id, int cpus, double expected = 0) {
  SchedRequest r;
  r.id = id;
  r.devices = 0;
  r.label = "cpu";
  r.cpus = cpus;
  r.expected_seconds = expected;
  return r;
}

SchedRequest card_step(std::uint64_t id, int devices, int cpus, double expected = 0) {
  SchedRequest r = cpu_step(id, cpus, expected);
  r.devices = devices;
  r.label = "card";
  return r;
}

std::vector<std::uint64_t> started(const ScheduleResult& r) {
  std::vector<std::uint64_t> ids;
  for (const auto& a : r.start) ids.push_back(a.request);
  return ids;
}

/// [start, end] of each step, from the lines its command appended to `file` ("start NAME T" / "end NAME T").
std::map<std::string, std::pair<double, double>> intervals(const fs::path& file) {
  std::map<std::string, std::pair<double, double>> out;
  std::istringstream in(read_file(file));
  for (std::string what, name; in >> what >> name;) {
    double t = 0;
    in >> t;
    (what == "start" ? out[name].first : out[name].second) = t;
  }
  return out;
}

/// The most steps running at one moment.
int most_at_once(const std::map<std::string, std::pair<double, double>>& iv) {
  int most = 0;
  for (const auto& [name, a] : iv) {
    int n = 0;
    for (const auto& [other, b] : iv) n += b.first <= a.first && a.first < b.second;
    most = std::max(most, n);
  }
  return most;
}

}  // namespace

TEST_CASE("host resources: on 4 CPUs, steps asking 2 CPUs each start two at a time, the others say what they wait for", "[sched]") {
  SchedHost host{4, 0, {}};
  std::vector<SchedRequest> q;
  for (std::uint64_t i = 1; i <= 6; ++i) q.push_back(cpu_step(i, 2));
  auto r = schedule({}, {}, q, 0, true, &host);
  CHECK(started(r) == std::vector<std::uint64_t>{1, 2});
  CHECK(r.waiting_reason[3] == "waiting for 2 CPUs: 4 of 4 in use");
  CHECK(r.waiting_reason[4] == "waiting for 2 CPUs: 4 of 4 in use, 2 reserved for steps ahead");
  // Without a host budget CPUs are not scheduled: every one starts.
  CHECK(schedule({}, {}, q).start.size() == 6);
}

TEST_CASE("host resources: a 1-card step asking 4 CPUs waits for CPUs with its card free, and says so", "[sched]") {
  SchedHost host{4, 0, {{2, 0, 1e9}}};  // another step holds 2 CPUs
  auto r = schedule(free_cards(2), {}, {card_step(1, 1, 4)}, 0, true, &host);
  CHECK(r.start.empty());
  CHECK(r.waiting_reason[1] == "waiting for 4 CPUs: 2 of 4 in use; card 0 reserved for it");
  CHECK(r.reserved.count(0) == 1);
  // Its CPUs back: it starts on its card.
  host.in_use.clear();
  r = schedule(free_cards(2), {}, {card_step(1, 1, 4)}, 0, true, &host);
  REQUIRE(r.start.size() == 1);
  CHECK(r.start[0].cards == std::vector<int>{0});
}

TEST_CASE("host resources: a 2-card step asking CPUs is not starved by a stream of CPU-only steps, a short one backfills", "[sched]") {
  // 4 CPUs, 2 held until t=100 by a running step; the 2 cards busy until t=100. The 2-card step asking 2 CPUs
  // reserves the 2 free CPUs: CPU-only steps behind it may take them only when done before t=100.
  auto cards = free_cards(2);
  for (auto& c : cards) c.free = false, c.holder = "x", c.busy_until = 100;
  SchedHost host{4, 0, {{2, 0, 100}}};
  std::vector<SchedRequest> stream = {card_step(1, 2, 2, 600)};
  for (std::uint64_t i = 2; i < 12; ++i) stream.push_back(cpu_step(i, 2, 500));
  auto r = schedule(cards, {}, stream, 0, true, &host);
  CHECK(r.start.empty());
  CHECK(r.waiting_reason[2] == "waiting for 2 CPUs: 2 of 4 in use, 2 reserved for steps ahead");
  // A short one ends before the big step could start: it may use the reserved CPUs.
  stream.push_back(cpu_step(20, 2, 50));
  r = schedule(cards, {}, stream, 0, true, &host);
  INFO(r.waiting_reason[20] << " / " << r.examined);
  CHECK(started(r) == std::vector<std::uint64_t>{20});
  // Played forward: the cards and CPUs free at t=100 and the 2-card step starts then, ahead of the stream.
  for (auto& c : cards) c.free = true, c.busy_until = 1e9;
  host.in_use.clear();
  r = schedule(cards, {}, stream, 100, true, &host);
  REQUIRE(!r.start.empty());
  CHECK(r.start[0].request == 1);
  CHECK(r.start[0].cards == std::vector<int>{0, 1});
}

TEST_CASE("host resources: more CPUs or memory than the host has can never start, memory is said in bytes' units", "[sched]") {
  SchedHost host{4, 8ull << 30, {{0, 6ull << 30, 1e9}}};
  auto r = schedule({}, {}, {cpu_step(1, 8)}, 0, true, &host);
  CHECK(r.impossible == std::vector<std::uint64_t>{1});
  CHECK(r.waiting_reason[1] == "needs 8 CPUs but the host has 4 CPUs (runner.yml host:)");
  SchedRequest m = cpu_step(2, 1);
  m.memory = 4ull << 30;
  r = schedule({}, {}, {m}, 0, true, &host);
  CHECK(r.start.empty());
  CHECK(r.waiting_reason[2] == "waiting for 4 GiB of memory: 6 GiB of 8 GiB in use");
}

TEST_CASE("host resources: on host cpus 4 six 2-CPU steps run at most two at a time, with cpu quota and memory limit on "
          "their cgroup, a step over its memory fails with that reason, lint names a step asking more than the host",
          "[sched][run]") {
  TempDir d;
  const std::string marks = (d.path() / "t.txt").string();
  std::string cpu = "name: cpu\nparallel: true\nsteps:\n";
  for (int i = 1; i <= 6; ++i)
    cpu += "  - {name: c" + std::to_string(i) + ", cpus: 2, run: 'echo start c" + std::to_string(i) + " $(date +%s.%N) >> " + marks +
           "; sleep 0.6; echo end c" + std::to_string(i) + " $(date +%s.%N) >> " + marks + "'}\n";
  // The step reads its own cgroups: cpu.max (v2) or cpu.cfs_quota_us (v1), memory.max or memory.limit_in_bytes.
  const std::string show =
      "name: show\nsteps:\n  - name: limits\n    cpus: 3\n    memory: 64M\n    run: |\n"
      "      v2=$(sed -n 's/^0:://p' /proc/self/cgroup)\n"
      "      c1=$(sed -n 's/^[0-9]*:\\([^:]*,\\)\\{0,1\\}cpu\\(,[^:]*\\)\\{0,1\\}:\\(.*\\)/\\3/p' /proc/self/cgroup | head -1)\n"
      "      m1=$(sed -n 's/^[0-9]*:memory:\\(.*\\)/\\1/p' /proc/self/cgroup)\n"
      "      for f in /sys/fs/cgroup/$v2/cpu.max /sys/fs/cgroup/unified/$v2/cpu.max /sys/fs/cgroup/cpu$c1/cpu.cfs_quota_us \\\n"
      "               /sys/fs/cgroup/cpu,cpuacct$c1/cpu.cfs_quota_us /sys/fs/cgroup/$v2/memory.max /sys/fs/cgroup/unified/$v2/memory.max \\\n"
      "               /sys/fs/cgroup/memory$m1/memory.limit_in_bytes; do\n"
      "        [ -r \"$f\" ] && echo \"$(basename $f) $(cat $f)\"\n"
      "      done; true\n"
      "  - name: hog\n    memory: 32M\n    run: /usr/bin/python3 -c 'b = bytearray(300 * 1024 * 1024); print(len(b))'\n";
  write_project(d, {{"cpu.yml", cpu}, {"show.yml", show}});
  d.write("runner.yml", "sandbox: off\nhost: {cpus: 4, memory: 8G}\n");
  auto r = run_cli({"run", "--root", d.str(), "--job", "cpu", "--devices", "2", "--state-dir", (d.path() / "st").string(), "--lock-dir",
                    (d.path() / "locks").string()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto iv = intervals(marks);
  REQUIRE(iv.size() == 6);
  CHECK(most_at_once(iv) == 2);

  r = run_cli({"run", "--root", d.str(), "--job", "show", "--devices", "2", "--state-dir", (d.path() / "st2").string(), "--lock-dir",
               (d.path() / "locks").string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  std::string limits, hog;
  for (const auto& e : fs::recursive_directory_iterator(d.path() / "st2")) {
    const std::string name = e.path().filename().string();
    if (name.find("limits") != std::string::npos && e.path().extension() == ".log") limits = read_file(e.path());
    if (name.find("hog") != std::string::npos && e.path().extension() == ".log") hog = read_file(e.path());
  }
  INFO(limits);
  if (limits.find("cpu.max") != std::string::npos) CHECK(limits.find("cpu.max 300000 100000") != std::string::npos);
  else CHECK(limits.find("cpu.cfs_quota_us 300000") != std::string::npos);
  CHECK((limits.find("memory.max 67108864") != std::string::npos || limits.find("memory.limit_in_bytes 67108864") != std::string::npos));
  INFO(hog);
  CHECK(hog.find("it used more memory than it asked for (memory: 32 MiB): the OOM killer ended a process of it") != std::string::npos);

  d.write("jobs/huge.yml", "name: huge\nsteps:\n  - name: big\n    cpus: 8\n    memory: 64G\n    run: 'true'\n");
  r = run_cli({"lint", "--root", d.str()});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("jobs/huge.yml:4:11: error: step 'big' asks for 8 CPUs; runner.yml host: has 4 [exceeds-host]") != std::string::npos);
  CHECK(r.out.find("jobs/huge.yml:5:13: error: step 'big' asks for 64 GiB of memory; runner.yml host: has 8 GiB [exceeds-host]") !=
        std::string::npos);
}

TEST_CASE("host resources: a process whose steps had v1 limit cgroups leaves none of its own behind, and removes what a "
          "killed one left",
          "[sched][run]") {
  // Where a step's memory limit is a v1 cgroup beside this process's (the test machines: no controller in v2).
  std::string own;
  sh("sed -n 's/^[0-9]*:memory:\\(.*\\)/\\1/p' /proc/self/cgroup", &own);
  while (!own.empty() && own.back() == '\n') own.pop_back();
  const fs::path parent = "/sys/fs/cgroup/memory" + own;
  if (own.empty() || !fs::exists(parent / "memory.limit_in_bytes") || ::access(parent.c_str(), W_OK) != 0) {
    WARN("SKIPPED: no writable v1 memory hierarchy here");
    return;
  }
  // What a pto-runner killed mid-step left: its place (named by a pid no process can have) and a step's cgroup.
  const fs::path stale = parent / "pto-runner-4194305";
  REQUIRE(::mkdir(stale.c_str(), 0755) == 0);
  REQUIRE(::mkdir((stale / "step-1").c_str(), 0755) == 0);
  TempDir d;
  write_project(d, {{"m.yml", "name: m\nsteps:\n  - {name: a, memory: 64M, run: 'true'}\n  - {name: b, memory: 64M, run: 'true'}\n"}});
  d.write("runner.yml", "sandbox: off\n");
  Spawned run = spawn_cli({"run", "--root", d.str(), "--devices", "1", "--state-dir", (d.path() / "st").string(), "--lock-dir",
                           (d.path() / "locks").string()});
  const fs::path place = parent / ("pto-runner-" + std::to_string(run.pid));
  CommandResult r = wait_cli(run);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(fs::exists(stale));
  CHECK_FALSE(fs::exists(place));  // its steps' cgroups (kept for the next step) and its place went at its exit
}

TEST_CASE("host resources: the daemon's status shows CPUs in use and a 1-card step waiting for CPUs with its card free", "[daemon]") {
  Served s;
  const std::string marks = s.dir.str();
  write_project(s.dir, {{"hog.yml", "name: hog\nsteps:\n  - {name: all, cpus: 4, run: 'touch " + marks + "/hog.on; sleep 1000'}\n"},
                        {"card.yml", "name: card\nsteps:\n  - {name: one, devices: 1, cpus: 1, run: 'echo ran'}\n"}});
  s.dir.write("runner.yml", "sandbox: off\nhost: {cpus: 4, memory: 16G}\n");
  s.start();
  const std::string hog = s.submit_run({{"jobs", {"hog"}}});
  REQUIRE(wait_until([&] { return fs::exists(s.dir.path() / "hog.on"); }));
  const std::string card = s.submit_run({{"jobs", {"card"}}});
  json st;
  REQUIRE(wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["queue"].size() == 1 && st["host"]["cpus_in_use"] == 4;
  }, 10));
  CHECK(st["host"]["cpus"] == 4);
  CHECK(st["host"]["memory_bytes"] == 16ull << 30);
  CHECK(st["queue"][0]["reason"] == "waiting for 1 CPU: 4 of 4 in use; card 0 reserved for it");
  CHECK(st["devices"][0]["state"] == "reserved");
  auto metrics = pto::api_request("GET", s.url("/metrics"), s.token, "");
  CHECK(metrics.body.find("pto_runner_host_cpus{state=\"in_use\"} 4") != std::string::npos);
  // The hog cancelled: its CPUs come back and the card step runs.
  CHECK(s.post(api_path::run_cancel(hog), json::object()).status == 202);
  CHECK(s.wait_run(card)["state"] == "succeeded");
  CHECK(s.get(api_path::kStatus)["host"]["cpus_in_use"] == 0);
}
