// executor: slurm against a real Slurm: each test starts its own throw-away cluster
// (scripts/slurm-test-cluster.sh: munged, slurmctld, and two slurmd on this host: node `hostname -s` with 8
// fake cards in 4 typed pairs and feature a2a3, node pto-a5 with 2 a5 cards). Plain files stand in for
// /dev/davinci*; everything else (sbatch/srun, GRES allocation, scancel, squeue) is Slurm's own. Where Slurm
// is not installed the cluster tests say so loudly and pass nothing off as tested.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/runner_config.h"
#include "pypto_main.h"
#include "served_daemon.h"
#include "slurm/slurm_command.h"
#include "slurm/slurm_executor.h"
#include "test_support.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

struct TestCluster {
  TempDir dir;
  bool up = false;
  std::string conf;
  TestCluster() {
    // Each test process its own ports, so ctest -j runs clusters side by side.
    const int port = 10000 + (static_cast<int>(::getpid()) % 6000) * 3;
    std::string out;
    int rc = sh("SLURM_TEST_PORT=" + std::to_string(port) + " " + (source_dir() / "scripts/slurm-test-cluster.sh").string() +
                    " start " + dir.str() + " 2>&1",
                &out);
    if (rc == 77) {
      WARN("SKIPPED, NOT TESTED: Slurm is not installed here (apt-get install slurm-wlm munge): " << out);
      return;
    }
    INFO(out);
    REQUIRE(rc == 0);
    conf = (dir.path() / "slurm.conf").string();
    up = true;
  }
  ~TestCluster() {
    if (up) sh((source_dir() / "scripts/slurm-test-cluster.sh").string() + " stop " + dir.str() + " >/dev/null 2>&1");
  }
  std::map<std::string, std::string> env() const { return {{"SLURM_CONF", conf}}; }
  /// Jobs pto-runner submitted that Slurm still holds (pending, running, completing).
  std::vector<pto::SlurmJob> our_active_jobs() const {
    std::string out, error;
    REQUIRE(sh("SLURM_CONF=" + conf + " squeue --json", &out) == 0);
    std::vector<pto::SlurmJob> all, ours;
    REQUIRE(pto::parse_squeue_json(out, all, error));
    for (auto& j : all)
      if (j.comment.rfind("pto-runner instance=", 0) == 0 && j.active()) ours.push_back(std::move(j));
    return ours;
  }
  /// A daemon on this cluster: runner.yml's cards (8 in pairs), executor: slurm, SLURM_CONF; `more` appended
  /// to its runner.yml.
  void configure(Served& s, const std::string& more = "") const {
    s.devices = "";
    s.env = env();
    s.dir.write("runner.yml", host_yml(s.locks()) + more);
  }
  std::string host_yml(const std::string& lock_dir) const {
    return "executor: slurm\nslurm: {poll-seconds: 0.2}\ndevices:\n  ids: [0, 1, 2, 3, 4, 5, 6, 7]\n"
           "  groups: [[0, 1], [2, 3], [4, 5], [6, 7]]\n  lock-dir: " + lock_dir + "\n";
  }
};

bool no_process_with(const std::string& needle) {
  std::string out;
  sh("ps -eo stat=,args= | grep -v grep | grep -F -- '" + needle + "' | grep -v '^Z' || true", &out);
  return out.empty();
}

}  // namespace

TEST_CASE("slurm: GRES indices, counts and squeue --json are read as Slurm 22.05 prints them", "[slurm]") {
  CHECK(pto::gres_indices("npu:g1:2(IDX:2-3)") == std::vector<int>{2, 3});
  CHECK(pto::gres_indices("npu:g0:1(IDX:0),npu:g1:0(IDX:),npu:g2:0(IDX:)") == std::vector<int>{0});
  CHECK(pto::gres_indices("npu:4(IDX:0,2-3,6)") == std::vector<int>{0, 2, 3, 6});
  CHECK(pto::gres_indices("npu:g0:0(IDX:N/A)").empty());
  CHECK(pto::gres_counts("npu:g0:2,npu:g1:2,gpu:1", "npu") == std::map<std::string, int>{{"g0", 2}, {"g1", 2}});
  CHECK(pto::gres_counts("npu:g0:1(IDX:0),npu:g1:0(IDX:N/A)", "npu") == std::map<std::string, int>{{"g0", 1}, {"g1", 0}});
  CHECK(pto::gres_counts("npu:8", "npu") == std::map<std::string, int>{{"", 8}});
  std::vector<pto::SlurmJob> jobs;
  std::string error;
  const std::string text = R"J({"jobs": [
      {"job_id": 48, "name": "pto-runner/r/0/1/1", "comment": "pto-runner instance=abc run=r step=a / b",
       "job_state": "RUNNING", "state_reason": "None", "gres_detail": ["npu:g1:2(IDX:2-3)"], "nodes": "vm",
       "submit_time": 1796011354, "start_time": 1796011355},
      {"job_id": 49, "name": "x", "comment": "", "job_state": "PENDING", "state_reason": "Priority", "gres_detail": [],
       "nodes": ""}]})J";
  REQUIRE(pto::parse_squeue_json(text, jobs, error));
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].id == "48");
  CHECK(jobs[0].cards == std::vector<int>{2, 3});
  CHECK(jobs[0].node == "vm");
  CHECK(jobs[1].pending());
  CHECK(jobs[1].reason == "Priority");
  // Newer Slurm: the comment is an object, states are lists; a malformed entry is an error, not a throw.
  std::vector<pto::SlurmJob> newer;
  REQUIRE(pto::parse_squeue_json(R"J({"jobs": [{"job_id": 5, "name": "n", "comment": {"job": "pto-runner instance=x run=r step=s"},
      "job_state": ["RUNNING"], "state_reason": "None", "gres_detail": [], "nodes": "vm"}]})J", newer, error));
  CHECK(newer.at(0).comment == "pto-runner instance=x run=r step=s");
  CHECK(newer.at(0).state == "RUNNING");
  CHECK_FALSE(pto::parse_squeue_json(R"J({"jobs": [{"job_state": [7]}]})J", newer, error));
  CHECK(error.find("unexpected content") != std::string::npos);
  CHECK_FALSE(pto::parse_squeue_json("{\"nodes\": []}", jobs, error));
  CHECK(error.find("no job list") != std::string::npos);
}

TEST_CASE("slurm: a step's srun asks for its card group's GRES type, its card type as a feature, a time limit, "
          "and names its run and step", "[slurm]") {
  pto::SlurmConfig cfg;
  cfg.partition = "npu";
  cfg.args = {"--account=ci"};
  pto::StepLaunch l;
  l.devices = 2;
  l.device_type = "a5";
  l.timeout_seconds = 90;
  l.grace_seconds = 10;
  l.working_directory = "/srv/run/src";
  l.command = "python3 moe.py --ep 2";
  auto argv = pto::slurm_step_argv(cfg, l, "pto-runner/RUN/3/1/1", "pto-runner instance=t run=RUN step=model / moe", "g2", "n0nce");
  auto has = [&](const std::string& a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
  CHECK(argv.front() == "srun");
  CHECK(has("--gres=npu:g2:2"));
  CHECK(has("--constraint=a5"));
  CHECK(has("--partition=npu"));
  CHECK(has("--account=ci"));
  CHECK(has("--time=3"));  // 90 s + 10 s grace, in whole minutes, plus one: Slurm's backstop after ours
  CHECK(has("--job-name=pto-runner/RUN/3/1/1"));
  CHECK(has("--comment=pto-runner instance=t run=RUN step=model / moe"));
  CHECK(has("--chdir=/srv/run/src"));
  CHECK(argv.back() == "python3 moe.py --ep 2");  // an argv element: no shell line is built from it
  // Its cpus: and memory: are Slurm's to grant (memory in whole MiB, rounded up); nothing asked, nothing said.
  CHECK_FALSE(std::any_of(argv.begin(), argv.end(), [](const std::string& a) { return a.rfind("--cpus-per-task", 0) == 0 || a.rfind("--mem", 0) == 0; }));
  l.limits.cpus = 32;
  l.limits.memory_max = (64ull << 30) + 1;
  l.limits.memory_asked = true;
  argv = pto::slurm_step_argv(cfg, l, "n", "c", "", "n0nce");
  CHECK(has("--cpus-per-task=32"));
  CHECK(has("--mem=65537M"));
  l.limits = {};
  l.devices = 1;
  l.device_type.clear();
  argv = pto::slurm_step_argv(cfg, l, "n", "c", "", "n0nce");
  CHECK(std::find(argv.begin(), argv.end(), "--gres=npu:1") != argv.end());
}

TEST_CASE("slurm: runner.yml executor and slurm settings are checked with their lines", "[slurm]") {
  TempDir d;
  d.write("runner.yml", "executor: slurmm\n");
  pto::Diagnostics diags;
  pto::load_runner_config((d.path() / "runner.yml").string(), "runner.yml", diags);
  REQUIRE(diags.items().size() == 1);
  CHECK(diags.items()[0].message.find("'executor' is local or slurm, got 'slurmm'") != std::string::npos);
  CHECK(diags.items()[0].line == 1);
  d.write("runner.yml", "executor: slurm\ndevices:\n  groups: [[0, 1], [2, 3]]\nslurm:\n  group-types: [g0]\n  args: [account=ci, --output=x.log]\n");
  pto::Diagnostics d2;
  pto::load_runner_config((d.path() / "runner.yml").string(), "runner.yml", d2);
  REQUIRE(d2.items().size() == 3);
  std::string all;
  for (const auto& i : d2.items()) all += i.message + "\n";
  CHECK(all.find("'args' are srun options like --account=ci, got 'account=ci'") != std::string::npos);
  CHECK(all.find("names 1 GRES type(s) for 2 devices.groups") != std::string::npos);
  CHECK(all.find("'args' cannot set '--output=x.log'") != std::string::npos);  // it would hide the placement line
}

TEST_CASE("slurm: the shipped definitions run through Slurm: each device step gets its cards inside one group, "
          "no card shared at any moment, moe on 2 cards with --ep 2, the a5 job on the a5 node", "[slurm]") {
  TestCluster c;
  if (!c.up) return;
  PyptoMain p;
  p.base.write("host.yml", read_file(p.base.path() / "host.yml") + "executor: slurm\nslurm: {poll-seconds: 0.2}\n");
  p.extra_env = c.env();
  p.extra_env["FAKE_HOLD"] = "0.3";  // each step holds its cards 0.3 s: sharing would overlap
  CommandResult plan = p.cli({"plan", "--format", "json"});
  REQUIRE(plan.exit_code == 0);
  std::map<std::string, int> devices_of;  // "job / step" -> cards asked for
  const json planned = json::parse(plan.out);
  for (const auto& job : planned["jobs"])
    for (const auto& st : job["steps"]) devices_of[job["name"].get<std::string>() + " / " + st["name"].get<std::string>()] = st["devices"];
  CommandResult r = p.cli({"run"});
  INFO(r.out << r.err << read_file(p.base.path() / "fake.log"));
  REQUIRE(r.exit_code == 0);
  // The console names each started step and the cards Slurm gave it: as many as it asked for.
  std::set<std::string> device_steps;  // a perf step starts once per sample: counted once
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("==> ", 0) != 0 || line.find("  [cards ") == std::string::npos) continue;
    std::string label = line.substr(4, line.find("  [cards ") - 4);
    std::string cards = line.substr(line.find("  [cards ") + 9);
    cards.pop_back();
    INFO(label);
    REQUIRE(devices_of.count(label));
    CHECK(static_cast<int>(ids_of(cards).size()) == devices_of[label]);
    device_steps.insert(label);
  }
  int asked = 0;
  for (const auto& [label, n] : devices_of) asked += n > 0;
  CHECK(static_cast<int>(device_steps.size()) == asked);
  // What the steps saw: TASK_DEVICE and the node from Slurm, and when they held them.
  struct Held {
    std::string node;
    std::vector<int> cards;
    double start, end;
  };
  std::vector<Held> held;
  bool saw_moe = false, saw_a5 = false;
  for (const auto& inv : p.invocations()) {
    CHECK(inv["kind"] != "error");
    if (!inv["task_device"].is_string()) continue;
    Held h{inv["node"].is_string() ? inv["node"].get<std::string>() : "", ids_of(inv["task_device"]), inv["start"], inv["end"]};
    CHECK(!h.node.empty());  // run by Slurm, on the node it chose
    if (h.cards.size() == 2) {  // a pair is a whole group
      CHECK(h.cards[0] % 2 == 0);
      CHECK(h.cards[1] == h.cards[0] + 1);
      CHECK(h.node != "pto-a5");
    }
    if (inv["kind"] == "script" && inv["script"] == "models/deepseek_v4_flash_mtp/moe.py") {
      saw_moe = true;
      CHECK(inv["ep"] == "2");
      CHECK(h.cards.size() == 2);
    }
    if (inv["kind"] == "pytest" && inv["argv"].dump().find("--platform=a5\"") != std::string::npos) {
      saw_a5 = true;
      CHECK(h.node == "pto-a5");  // device-type a5 became --constraint=a5
    }
    held.push_back(std::move(h));
  }
  CHECK(saw_moe);
  CHECK(saw_a5);
  for (std::size_t i = 0; i < held.size(); ++i)
    for (std::size_t k = i + 1; k < held.size(); ++k) {
      if (held[i].node != held[k].node) continue;
      bool share = false;
      for (int a : held[i].cards)
        for (int b : held[k].cards) share |= a == b;
      if (!share) continue;
      INFO("node " << held[i].node << ": [" << held[i].start << ", " << held[i].end << "] and [" << held[k].start << ", " << held[k].end << "]");
      CHECK((held[i].end <= held[k].start || held[k].end <= held[i].start));
    }
  CHECK(c.our_active_jobs().empty());
}

TEST_CASE("slurm: Slurm's reason for a waiting step and the node and cards of running ones are in the status and "
          "/metrics, and a cancelled run leaves no Slurm job and no process", "[slurm]") {
  TestCluster c;
  if (!c.up) return;
  Served s;
  c.configure(s);
  std::string steps;
  for (int i = 0; i < 5; ++i)  // 5 pairs for 4 pairs of cards: one waits in Slurm's queue
    steps += "  - {name: p" + std::to_string(i) + ", devices: 2, run: 'sleep 1000 # slurm-cancel-" + std::to_string(i) + "'}\n";
  write_project(s.dir, {{"pairs.yml", "name: pairs\nparallel: true\nsteps:\n" + steps}});
  s.start();
  std::string id = s.submit_run();
  json status;
  REQUIRE(wait_until([&] {
    status = s.get(api_path::kStatus);
    int running = 0;
    for (const auto& n : status["nodes"]) running += static_cast<int>(n["steps"].size());
    return running == 4 && status["queue"].size() == 1 && status["queue"][0]["reason"].get<std::string>().rfind("Slurm: ", 0) == 0;
  }, 30));
  CHECK(status["executor"] == "slurm");
  std::set<int> cards;
  for (const auto& n : status["nodes"])
    for (const auto& st : n["steps"]) {
      CHECK(n["name"] != "pto-a5");
      CHECK(st["cards"].size() == 2);
      CHECK(!st["slurm_job"].get<std::string>().empty());
      for (int card : st["cards"]) CHECK(cards.insert(card).second);  // no card twice
    }
  CHECK(cards.size() == 8);
  std::string reason = status["queue"][0]["reason"];
  CHECK((reason.find("Resources") != std::string::npos || reason.find("Priority") != std::string::npos));
  CHECK(status["queue"][0]["run"] == id);
  json run = s.get(api_path::run(id));
  int waiting = 0;
  for (const auto& st : run["jobs"][0]["steps"])
    if (st["state"] == "waiting") {
      ++waiting;
      CHECK(st["wait_reason"].get<std::string>().rfind("Slurm: ", 0) == 0);
    } else {
      CHECK(!st["node"].get<std::string>().empty());
    }
  CHECK(waiting == 1);
  auto metrics = pto::api_request("GET", s.url(api_path::kMetrics));
  CHECK(metrics.body.find("pto_runner_slurm_running_steps{node=\"") != std::string::npos);
  CHECK(metrics.body.find("pto_runner_slurm_pending_steps{reason=\"") != std::string::npos);
  TempDir prom;
  prom.write("m.txt", metrics.body);
  std::string promtool;
  if (sh("command -v promtool >/dev/null") == 0) CHECK(sh("promtool check metrics < " + (prom.path() / "m.txt").string() + " 2>&1", &promtool) == 0);

  // Draining is Slurm's: a node, with the reason, shown as Slurm shows it; a card drain says where to go.
  const std::string busy_node = status["nodes"][0]["steps"].empty() ? status["nodes"][1]["name"] : status["nodes"][0]["name"];
  std::map<std::string, std::string> admin = {{"PTO_RUNNER_TOKEN", s.token}};
  CommandResult drain = run_cli({"devices", "--server", s.url(), "--drain-node", busy_node, "--reason", "card 3 flaky"}, admin);
  INFO(drain.out << drain.err);
  CHECK(drain.exit_code == 0);
  REQUIRE(wait_until([&] {
    const json now = s.get(api_path::kStatus);
    for (const auto& n : now["nodes"])
      if (n["name"] == busy_node) return n["drained"] == true && n["reason"] == "card 3 flaky";
    return false;
  }, 15));
  CHECK(s.post(api_path::device(3, "drain"), json::object()).status == 409);
  CHECK(run_cli({"devices", "--server", s.url(), "--undrain-node", busy_node}, admin).exit_code == 0);
  CHECK(wait_until([&] {
    const json now = s.get(api_path::kStatus);
    for (const auto& n : now["nodes"])
      if (n["name"] == busy_node) return n["drained"] == false;
    return false;
  }, 15));

  CommandResult cli = run_cli({"status", "--server", s.url()});
  CHECK(cli.exit_code == 0);
  CHECK(cli.out.find("SLURM NODES") != std::string::npos);
  CHECK(cli.out.find("pairs / p") != std::string::npos);
  CHECK(cli.out.find("Slurm: ") != std::string::npos);
  // The page a person reads shows the node, our steps there with their log links, and Slurm's reason.
  if (std::string dom; s.page_dom(dom)) {
    const std::string node = status["nodes"][0]["steps"].empty() ? status["nodes"][1]["name"] : status["nodes"][0]["name"];
    CHECK(dom.find("<td>" + node + "</td>") != std::string::npos);
    CHECK(dom.find("href=\"" + api_path::run(id) + "/steps/1-") != std::string::npos);
    CHECK(dom.find("Slurm: ") != std::string::npos);
  } else {
    WARN("NOT TESTED here: the page in a browser (chromium is not installed)");
  }

  REQUIRE(s.post(api_path::run_cancel(id), json::object()).status == 202);
  json done = s.wait_run(id, 60);
  CHECK(done["state"] == "cancelled");
  CHECK(wait_until([&] { return c.our_active_jobs().empty(); }, 20));
  CHECK(wait_until([&] { return no_process_with("slurm-cancel-"); }, 20));
}

TEST_CASE("slurm: a timed-out step leaves no Slurm job and no process, a step Slurm cannot place in time times "
          "out, and a failed step's exit code reaches the run", "[slurm]") {
  TestCluster c;
  if (!c.up) return;
  Served s;
  c.configure(s, "kill-grace-seconds: 2\n");
  std::string pairs;
  for (int i = 0; i < 4; ++i)  // every pair of the 8-card node busy for 6 s
    pairs += "  - {name: p" + std::to_string(i) + ", devices: 2, run: 'sleep 6 # slurm-timeout-p" + std::to_string(i) + "'}\n";
  write_project(s.dir, {{"mixed.yml", "name: mixed\nparallel: true\nsteps:\n" + pairs +
                                      "  - {name: slow, devices: 1, timeout-minutes: 0.05, run: 'sleep 1000 # slurm-timeout'}\n"
                                      "  - {name: bad, devices: 1, run: 'echo on $TASK_DEVICE; exit 7'}\n"
                                      "  - {name: late, devices: 2, queue-timeout-minutes: 0.02, run: 'echo never placed'}\n"
                                      "  - {name: cpu, run: 'echo here'}\n"}});
  s.start();
  std::string id = s.submit_run();
  json run = s.wait_run(id, 90);
  INFO(run.dump(2));
  CHECK(run["state"] == "failed");
  CHECK(run["result"] == 1);
  const auto& steps = run["jobs"][0]["steps"];
  for (int i = 0; i < 4; ++i) CHECK(steps[i]["state"] == "succeeded");
  CHECK(steps[4]["state"] == "timed_out");  // slow: timeout-minutes
  CHECK(steps[4]["timed_out"] == true);
  CHECK(steps[5]["state"] == "failed");     // bad
  CHECK(steps[5]["exit_code"] == 7);
  CHECK(steps[5]["cards"].size() == 1);
  CHECK(steps[6]["state"] == "timed_out");  // late: queue-timeout-minutes, never placed
  CHECK_FALSE(steps[6].contains("node"));
  CHECK(steps[7]["state"] == "succeeded");
  // The log is the step's own output through srun, without the placement line.
  auto log = pto::api_request("GET", s.url(api_path::step_log(id, "1-6")));
  CHECK(log.body.find("on " + std::to_string(steps[5]["cards"][0].get<int>()) + "\n") != std::string::npos);
  CHECK(log.body.find("pto-runner-placed") == std::string::npos);
  auto late = pto::api_request("GET", s.url(api_path::step_log(id, "1-7")));
  CHECK(late.body.find("queue-timeout-minutes") != std::string::npos);
  CHECK(late.body.find("never placed") == std::string::npos);
  CHECK(wait_until([&] { return c.our_active_jobs().empty(); }, 20));
  CHECK(wait_until([&] { return no_process_with("slurm-timeout"); }, 20));
}

TEST_CASE("slurm: a daemon killed with SIGKILL mid-run and restarted cancels the interrupted run's Slurm jobs, and a new "
          "run succeeds", "[slurm]") {
  TestCluster c;
  if (!c.up) return;
  Served s;
  c.configure(s, "supervise: false\n");  // srun the daemon's own child (with supervisors: the next test)
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - {name: hold, devices: 1, run: 'sleep 1000 # slurm-sigkill'}\n"},
                        {"two.yml", "name: two\nsteps:\n  - {name: quick, devices: 2, run: 'echo quick on $TASK_DEVICE'}\n"}});
  s.start();
  std::string id = s.submit_run({{"jobs", {"one"}}});
  REQUIRE(wait_until([&] { return s.get(api_path::run(id))["jobs"][0]["steps"][0]["state"] == "running"; }, 30));
  REQUIRE(c.our_active_jobs().size() == 1);
  ::kill(s.proc.pid, SIGKILL);
  wait_cli(s.proc);
  s.proc.pid = -1;
  CHECK(c.our_active_jobs().size() == 1);  // Slurm still runs it: nobody told it otherwise

  Served again;
  c.configure(again, "supervise: false\n");
  again.state_dir = s.state();
  write_project(again.dir, {{"one.yml", "name: one\nsteps:\n  - {name: hold, devices: 1, run: 'sleep 1000 # slurm-sigkill'}\n"},
                            {"two.yml", "name: two\nsteps:\n  - {name: quick, devices: 2, run: 'echo quick on $TASK_DEVICE'}\n"}});
  again.start();
  CHECK(again.get(api_path::run(id))["state"] == "interrupted");
  CHECK(wait_until([&] { return c.our_active_jobs().empty(); }, 20));
  CHECK(wait_until([&] { return no_process_with("slurm-sigkill"); }, 20));
  auto r2 = again.post(api_path::kRuns, {{"jobs", {"two"}}});
  REQUIRE(r2.status == 201);
  json done = again.wait_run(json::parse(r2.body)["id"], 60);
  CHECK(done["state"] == "succeeded");
}

TEST_CASE("slurm: a daemon SIGKILLed while Slurm runs a step is started again and follows that job to its end: the step "
          "runs once", "[slurm][supervise]") {
  TestCluster c;
  if (!c.up) return;
  Served s;
  c.configure(s);
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  fs::permissions(marks, fs::perms::all);
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - {name: hold, devices: 1, run: 'echo x >> " + (marks / "ran").string() +
                                        "; echo on $TASK_DEVICE; sleep 3; echo slurm-end'}\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"one"}}});
  REQUIRE(wait_until([&] { return s.get(api_path::run(id))["jobs"][0]["steps"][0]["state"] == "running"; }, 30));
  REQUIRE(c.our_active_jobs().size() == 1);
  const std::string job = c.our_active_jobs()[0].id;
  s.stop(SIGKILL);
  CHECK(c.our_active_jobs().size() == 1);  // Slurm runs on, its srun held by the step supervisor
  s.start();  // the same daemon's directory, state and cluster
  const json run = s.wait_run(id, 60);
  INFO(run.dump(2));
  CHECK(run["state"] == "succeeded");
  const json& step = run["jobs"][0]["steps"][0];
  CHECK(step["slurm_job"] == job);
  CHECK(read_file(marks / "ran") == "x\n");  // once
  const std::string log = pto::api_request("GET", s.url(api_path::step_log(id, "1-1"))).body;
  CHECK(log.find("slurm-end") != std::string::npos);
  CHECK(log.find("pto-runner-placed") == std::string::npos);  // the placement line never reaches the log
  CHECK(wait_until([&] { return c.our_active_jobs().empty(); }, 20));
}

TEST_CASE("slurm: a step's task-submit runs its command as a Slurm job on the cards Slurm picks, and cancelling the "
          "run ends that job", "[slurm]") {
  TestCluster c;
  if (!c.up) return;
  TempDir bin;
  fs::create_symlink(PTO_RUNNER_BIN, bin.path() / "task-submit");
  Served s;
  c.configure(s);
  s.env["PATH"] = bin.str() + ":" + std::getenv("PATH");
  const fs::path pidfile = s.dir.path() / "leased.pid";
  write_project(s.dir, {{"h.yml", "name: h\nsteps:\n"
                                  "  - name: pair\n    run: |\n"
                                  "      task-submit --device-num 2 --run 'echo leased {} $TASK_DEVICE on $SLURMD_NODENAME'\n"
                                  "  - name: capped\n    run: |\n"
                                  "      task-submit --device-num 1 --max-time 2 --run 'sleep 1000 # slurm-lease-max' || echo \"exit $?\"\n"
                                  "  - name: hold\n    run: |\n"
                                  "      task-submit --device-num 1 --run 'echo $$ > " + pidfile.string() +
                                  "; exec sleep 1000 # slurm-lease'\n"}});
  s.start();
  std::string id = s.submit_run();
  REQUIRE(wait_for_content(pidfile, 30));
  // The first lease ran on a whole pair Slurm picked: {} and TASK_DEVICE filled in the job, on a node.
  std::string log = pto::api_request("GET", s.url(api_path::step_log(id, "1-1"))).body;
  INFO(log);
  auto at = log.find("leased ");
  REQUIRE(at != std::string::npos);
  std::istringstream words(log.substr(at + 7));
  std::string braces, device, on, node;
  words >> braces >> device >> on >> node;
  CHECK(braces == device);
  std::vector<int> pair = ids_of(device);
  REQUIRE(pair.size() == 2);
  CHECK(pair[0] % 2 == 0);
  CHECK(pair[1] == pair[0] + 1);
  CHECK(node != "pto-a5");
  // --max-time counts from the command's start in its job, and ends it with task-submit's 137.
  std::string capped = pto::api_request("GET", s.url(api_path::step_log(id, "1-2"))).body;
  INFO(capped);
  CHECK(capped.find("killed after --max-time 2 s") != std::string::npos);
  CHECK(capped.find("exit 137") != std::string::npos);
  CHECK(no_process_with("slurm-lease-max"));
  std::vector<pto::SlurmJob> jobs;
  for (auto& j : c.our_active_jobs())
    if (j.state == "RUNNING") jobs.push_back(j);  // (the first lease's job may still be COMPLETING)
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].name.find("/lease/") != std::string::npos);  // the second lease's command, in Slurm
  int leased = std::stoi(read_file(pidfile));
  REQUIRE(s.post(api_path::run_cancel(id), json::object()).status == 202);
  CHECK(s.wait_run(id, 60)["state"] == "cancelled");
  CHECK(wait_until([&] { return c.our_active_jobs().empty(); }, 20));
  CHECK(wait_until([&] { return !pid_running(leased); }, 20));
}
