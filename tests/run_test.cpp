// `pto-runner run` end to end: real processes, real flock locks, real signals.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "exec/process_sweep.h"
#include "sched/card_lock.h"
#include "gha_parser.h"
#include <nlohmann/json.hpp>
#include "test_support.h"

using namespace pto::test;

namespace {

struct Project {
  TempDir dir;
  std::string locks() const { return (dir.path() / "locks").string(); }
  std::string state() const { return (dir.path() / "state").string(); }
  CommandResult run(std::vector<std::string> extra, std::map<std::string, std::string> env = {}) const {
    std::vector<std::string> args = {"run", "--root", dir.str(), "--lock-dir", locks(), "--state-dir", state()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args, env);
  }
  Spawned spawn(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"run", "--root", dir.str(), "--lock-dir", locks(), "--state-dir", state()};
    args.insert(args.end(), extra.begin(), extra.end());
    return spawn_cli(args);
  }
};

// A step that records "<TASK_DEVICE> <start ns> <end ns>" into $REC.
std::string recording_step(const std::string& name, int devices, double seconds = 0.3) {
  std::ostringstream os;
  os << "  - name: " << name << "\n    devices: " << devices << "\n    run: s=$(date +%s%N); sleep " << seconds
     << "; echo \"$TASK_DEVICE $s $(date +%s%N) " << name << "\" >> \"$REC\"\n";
  return os.str();
}

struct Interval {
  std::set<int> cards;
  long long start, end;
  std::string name;
  std::string devices;
};

std::vector<Interval> read_intervals(const fs::path& p) {
  std::vector<Interval> out;
  std::istringstream in(read_file(p));
  std::string devices, name;
  long long s, e;
  while (in >> devices >> s >> e >> name) {
    Interval iv{{}, s, e, name, devices};
    std::stringstream ds(devices);
    std::string id;
    while (std::getline(ds, id, ',')) iv.cards.insert(std::stoi(id));
    out.push_back(iv);
  }
  return out;
}

void check_no_overlap(const std::vector<Interval>& ivs) {
  for (std::size_t a = 0; a < ivs.size(); ++a)
    for (std::size_t b = a + 1; b < ivs.size(); ++b) {
      bool share = false;
      for (int c : ivs[a].cards) share |= ivs[b].cards.count(c) > 0;
      if (!share) continue;
      INFO(ivs[a].name << " and " << ivs[b].name << " share a card");
      CHECK((ivs[a].end <= ivs[b].start || ivs[b].end <= ivs[a].start));
    }
}

}  // namespace

TEST_CASE("run: two 1-card steps and a 2-card step on 2 cards never overlap on a card", "[run]") {
  Project p;
  write_project(p.dir, {{"par.yml", "name: par\nparallel: true\nenv: {REC: " + (p.dir.path() / "rec").string() +
                                        "}\nsteps:\n" + recording_step("one", 1) + recording_step("two", 1) +
                                        recording_step("both", 2) + recording_step("three", 1)}});
  CommandResult r = p.run({"--devices", "2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto ivs = read_intervals(p.dir.path() / "rec");
  REQUIRE(ivs.size() == 4);
  check_no_overlap(ivs);
  for (const auto& iv : ivs)
    if (iv.name == "both") CHECK(iv.devices == "0,1");
    else CHECK(iv.cards.size() == 1);
  // The first two 1-card steps ran at the same time (the pool was used in parallel).
  CHECK((ivs[0].start < ivs[1].end && ivs[1].start < ivs[0].end));
}

TEST_CASE("run: with groups 0,1,2,3 a 2-card step never spans groups, 3 cards is a load error", "[run]") {
  Project p;
  std::string steps;
  for (int i = 0; i < 4; ++i) steps += recording_step("pair" + std::to_string(i), 2, 0.2);
  for (int i = 0; i < 3; ++i) steps += recording_step("single" + std::to_string(i), 1, 0.1);
  write_project(p.dir, {{"g.yml", "name: g\nparallel: true\nenv: {REC: " + (p.dir.path() / "rec").string() +
                                      "}\nsteps:\n" + steps}});
  CommandResult r = p.run({"--devices", "0-3", "--device-groups", "0,1;2,3"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto ivs = read_intervals(p.dir.path() / "rec");
  REQUIRE(ivs.size() == 7);
  check_no_overlap(ivs);
  for (const auto& iv : ivs)
    if (iv.name.rfind("pair", 0) == 0) CHECK((iv.devices == "0,1" || iv.devices == "2,3"));

  Project bad;
  write_project(bad.dir, {{"g.yml", "name: g\nsteps:\n  - run: 'true'\n    devices: 3\n"}});
  CommandResult b = bad.run({"--devices", "0-3", "--device-groups", "0,1;2,3"});
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("jobs/g.yml:4:14: error: step 'Run true' needs 3 cards from one device group; the largest group "
                   "has 2 [devices-exceed-pool]") != std::string::npos);
}

TEST_CASE("run: a timed-out step's SIGTERM-trapping child and setsid grandchild are gone before its card moves on",
          "[run]") {
  Project p;
  auto pidfile = (p.dir.path() / "escapee.pid").string();
  auto rec = (p.dir.path() / "rec").string();
  p.dir.write("runner.yml", "kill-grace-seconds: 0.3\n");
  write_project(p.dir, {{"t.yml", "name: t\nparallel: true\nsteps:\n"
                                  "  - name: hang\n    devices: 1\n    timeout-minutes: 0.01\n"
                                  "    run: |\n      trap '' TERM\n      setsid sleep 1000 & echo $! > " + pidfile +
                                  "\n      echo \"$TASK_DEVICE $(date +%s%N)\" > " + rec + ".hang\n      sleep 1000\n"
                                  "  - name: next\n    devices: 1\n    run: |\n      test ! -e /proc/$(cat " + pidfile +
                                  ")/cmdline || grep -q Z /proc/$(cat " + pidfile + ")/stat\n"
                                  "      echo \"$TASK_DEVICE $(date +%s%N)\" > " + rec + ".next\n"}});
  CommandResult r = p.run({"--devices", "1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);  // the timed-out step fails the job
  CHECK(r.out.find("timed_out") != std::string::npos);
  CHECK(r.out.find("next: succeeded") != std::string::npos);  // and its check that the escapee is gone passed
  int escapee = std::stoi(read_file(pidfile));
  CHECK_FALSE(pid_running(escapee));
  CHECK(read_file(rec + ".hang").substr(0, 2) == "0 ");
  CHECK(read_file(rec + ".next").substr(0, 2) == "0 ");
}

TEST_CASE("run: SIGTERM mid-run exits 143 with no process left and no lock held", "[run]") {
  Project p;
  auto marks = p.dir.path();
  write_project(p.dir, {{"s.yml", "name: s\nparallel: true\nsteps:\n"
                                  "  - {name: a, devices: 1, run: 'echo $$ > " + (marks / "a.pid").string() +
                                  "; setsid sleep 1000 & echo $! > " + (marks / "a.escapee").string() + "; sleep 1000'}\n"
                                  "  - {name: b, devices: 1, run: 'trap \"\" TERM; echo $$ > " + (marks / "b.pid").string() +
                                  "; sleep 1000'}\n"}});
  p.dir.write("runner.yml", "kill-grace-seconds: 0.5\n");
  Spawned s = p.spawn({"--devices", "2"});
  REQUIRE(wait_until([&] {
    return fs::exists(marks / "a.escapee") && fs::exists(marks / "b.pid") && !read_file(marks / "a.escapee").empty();
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(s.pid, SIGTERM);
  CommandResult r = wait_cli(s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 143);
  for (const char* f : {"a.pid", "a.escapee", "b.pid"}) CHECK_FALSE(pid_running(std::stoi(read_file(marks / f))));
  std::string holder;
  CHECK_FALSE(pto::CardLock::held_elsewhere(p.locks(), 0, holder));
  CHECK_FALSE(pto::CardLock::held_elsewhere(p.locks(), 1, holder));
  CHECK(r.out.find("cancelled") != std::string::npos);
}

TEST_CASE("run: retry follows on-exit-codes", "[run]") {
  Project p;
  auto count = (p.dir.path() / "count").string();
  write_project(p.dir, {{"r.yml", "name: r\nsteps:\n  - name: flaky\n    retry: {max: 3, on-exit-codes: [75]}\n"
                                  "    run: |\n      n=$(cat " + count + " 2>/dev/null || echo 0); echo $((n+1)) > " + count +
                                  "\n      [ $n -ge 2 ] || exit 75\n"}});
  CommandResult r = p.run({});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_file(count) == "3\n");
  CHECK(r.out.find("succeeded (3 attempts)") != std::string::npos);

  Project q;
  auto count2 = (q.dir.path() / "count").string();
  write_project(q.dir, {{"r.yml", "name: r\nsteps:\n  - name: broken\n    retry: {max: 3, on-exit-codes: [75]}\n"
                                  "    run: echo x >> " + count2 + "; exit 1\n"}});
  CommandResult r2 = q.run({});
  CHECK(r2.exit_code == 1);
  CHECK(read_file(count2) == "x\n");  // exit 1 is not retried
}

TEST_CASE("run: fail-fast cancels the other matrix legs, fail-fast: false lets them finish", "[run]") {
  for (bool fail_fast : {true, false}) {
    Project p;
    auto done = (p.dir.path() / "slow-done").string();
    write_project(p.dir, {{"m.yml", std::string("name: m\nstrategy:\n  fail-fast: ") + (fail_fast ? "true" : "false") +
                                        "\n  matrix:\n    leg: [fast, slow]\nsteps:\n"
                                        "  - run: |\n      if [ ${{ matrix.leg }} = fast ]; then sleep 0.2; exit 1; fi\n"
                                        "      sleep 2; touch " + done + "\n"}});
    CommandResult r = p.run({});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(fs::exists(done) == !fail_fast);
  }
}

TEST_CASE("run: continue-on-error, needs and if: follow GitHub Actions", "[run]") {
  Project p;
  auto mark = [&](const std::string& n) { return "touch " + (p.dir.path() / n).string(); };
  write_project(p.dir, {
      {"a.yml", "name: a\nsteps:\n  - {run: 'exit 3', continue-on-error: true}\n  - run: " + mark("a2") +
                    "\n  - {run: 'exit 4'}\n  - {run: " + mark("a-skipped") + "}\n  - {if: failure(), run: " + mark("a-cleanup") + "}\n"},
      {"b.yml", "name: b\nneeds: a\nsteps:\n  - run: " + mark("b") + "\n"},
      {"c.yml", "name: c\nneeds: [a]\nif: failure()\nsteps:\n  - run: " + mark("c") + "\n"},
      {"d.yml", "name: d\nneeds: [b]\nif: always()\nsteps:\n  - run: " + mark("d") + "\n"},
  });
  CommandResult r = p.run({});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(fs::exists(p.dir.path() / "a2"));
  CHECK_FALSE(fs::exists(p.dir.path() / "a-skipped"));
  CHECK(fs::exists(p.dir.path() / "a-cleanup"));
  CHECK_FALSE(fs::exists(p.dir.path() / "b"));
  CHECK(fs::exists(p.dir.path() / "c"));
  CHECK(fs::exists(p.dir.path() / "d"));
  CHECK(r.out.find("--- job b: skipped (a job it needs did not succeed)") != std::string::npos);
}

TEST_CASE("run: a card failing as infrastructure is drained and never handed out again", "[run]") {
  Project p;
  p.dir.write("runner.yml", "health: {infra-exit-codes: [42], drain-after: 1}\n");
  auto rec = (p.dir.path() / "rec").string();
  // retry max 0: not retried elsewhere (the default for the card's failures), so the drain is what is seen.
  write_project(p.dir, {{"h.yml", "name: h\nsteps:\n  - {devices: 1, continue-on-error: true, retry: {max: 0}, run: 'echo $TASK_DEVICE >> " +
                                      rec + "; exit 42'}\n  - {devices: 1, run: 'echo $TASK_DEVICE >> " + rec + "'}\n"
                                      "  - {devices: 1, run: 'echo again $TASK_DEVICE >> " + rec + "'}\n"}});
  CommandResult r = p.run({"--devices", "2"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_file(rec) == "0\n1\nagain 1\n");
  std::string state = read_file(fs::path(p.state()) / "devices.json");
  CHECK(state.find("\"0\"") != std::string::npos);
  CHECK(state.find("infrastructure failures in a row") != std::string::npos);
  // The next run keeps card 0 out: a 2-card step can never be served -> infrastructure failure, exit 3.
  Project& q = p;
  q.dir.write("jobs/h.yml", "name: h\nsteps:\n  - {devices: 2, run: 'true'}\n");
  CommandResult r2 = q.run({"--devices", "2"});
  CHECK(r2.exit_code == 3);
  CHECK(r2.out.find("needs 2 cards but only 1 usable (1 drained)") != std::string::npos);
}

TEST_CASE("run: GitHub Actions groups, error annotations and step summary", "[run]") {
  Project p;
  auto summary = (p.dir.path() / "summary.md").string();
  p.dir.write("hostile.sh", kHostileStepScript);
  write_project(p.dir, {{"g.yml", "name: g\nsteps:\n  - {name: hello, run: 'echo hello; sh hostile.sh; echo \"**hello** from the step\" >> \"$GITHUB_STEP_SUMMARY\"'}\n"
                                  "  - {name: 'broken ##[error]n', run: 'echo nope; exit 5'}\n"}});
  CommandResult r = p.run({}, {{"GITHUB_ACTIONS", "true"}, {"GITHUB_STEP_SUMMARY", summary}});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("::group::g / hello (succeeded") != std::string::npos);
  CHECK(r.out.find("\n  ::endgroup::\n") != std::string::npos);  // the step's bytes are shown as they are
  // GitHub's parser accepts only the runner's own commands: groups, blocks and the annotation.
  std::vector<std::string> names;
  for (const auto& c : accepted_commands(r.out))
    if (c.name != "stop-commands" && c.name.size() != 32) names.push_back(c.name + ":" + c.data);
  REQUIRE(names.size() == 5);
  CHECK(names[0].rfind("group:g / hello (succeeded", 0) == 0);
  CHECK(names[1] == "endgroup:");
  CHECK(names[2].rfind("group:g / broken ##[error]n (failed", 0) == 0);
  CHECK(names[3] == "endgroup:");
  CHECK(names[4].rfind("error:exit 5; log: ", 0) == 0);
  CHECK(r.out.find("::error title=g / broken ##[error]n failed::exit 5") != std::string::npos);
  std::string md = read_file(summary);
  CHECK(md.find("| Job | Step | State | Waited | Duration | Cards | Exit |") != std::string::npos);
  CHECK(md.find("| g | broken ##[error]n | failed |") != std::string::npos);
  CHECK(md.find("\n**hello** from the step\n") != std::string::npos);  // each step's own summary follows the table
}

TEST_CASE("inside GitHub Actions definition text in the load errors of run and in lint and plan is never a workflow command", "[run]") {
  Project p;
  const std::map<std::string, std::string> actions = {{"GITHUB_ACTIONS", "true"}};
  // Only the runner's own commands may be accepted: stop/resume pairs and the annotations it means.
  auto foreign = [](const std::string& out) {
    std::vector<std::string> names;
    for (const auto& c : accepted_commands(out))
      if (c.name != "stop-commands" && c.name.size() != 32 && c.name != "error" && c.name != "warning") names.push_back(c.line);
    return names;
  };
  // A key nobody knows, named to be a command: the finding quotes it.
  write_project(p.dir, {{"bad.yml", "name: bad\nsteps:\n  - run: 'true'\n    '##[error]inj': 1\n    '::add-mask::k': 2\n"}});
  for (const auto& args : std::vector<std::vector<std::string>>{{"run"}, {"plan"}, {"lint"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--root", p.dir.str()});
    if (args[0] == "run") a.insert(a.end(), {"--lock-dir", p.locks(), "--state-dir", p.state()});
    CommandResult r = run_cli(a, actions);
    INFO(args[0] << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(foreign(r.out + r.err).empty());
    std::vector<ParsedCommand> errors;
    for (const auto& c : accepted_commands(r.out + r.err))
      if (c.name == "error") errors.push_back(c);
    REQUIRE(errors.size() == 2);  // one annotation per finding, at its line, with the key escaped
    CHECK(errors[0].line.find("::error file=") == 0);
    CHECK(errors[0].line.find(",line=4,col=5::") != std::string::npos);
    CHECK(errors[0].data.find("##[error]inj") != std::string::npos);
    CHECK(errors[1].data.find("::add-mask::k") != std::string::npos);
  }
  // A plan that loads: step names and commands inside a block; its JSON has no `##[` and parses the same.
  fs::remove(p.dir.path() / "jobs/bad.yml");
  write_project(p.dir, {{"ok.yml", "name: ok\nsteps:\n  - {name: '::error::n ##[error]m', run: 'echo ##[warning]w'}\n"}});
  CommandResult text = run_cli({"plan", "--root", p.dir.str()}, actions);
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("::error::n ##[error]m") != std::string::npos);
  CHECK(foreign(text.out).empty());
  CommandResult js = run_cli({"plan", "--root", p.dir.str(), "--format", "json"}, actions);
  CHECK(js.exit_code == 0);
  CHECK(foreign(js.out).empty());
  CHECK(js.out.find("##[") == std::string::npos);
  CHECK(nlohmann::json::parse(js.out)["jobs"][0]["steps"][0]["name"] == "::error::n ##[error]m");
}

TEST_CASE("run: a deduplicated step is not run and is reported", "[run]") {
  Project p;
  auto count = (p.dir.path() / "count").string();
  write_project(p.dir, {{"d.yml", "name: d\nsteps:\n  - {name: first, run: 'echo x >> " + count + "'}\n"
                                  "  - {name: copy, run: 'echo x >> " + count + "'}\n"}});
  CommandResult r = p.run({});
  CHECK(r.exit_code == 0);
  CHECK(read_file(count) == "x\n");
  CHECK(r.out.find("d / copy: deduplicated (same work as 'first'), not run") != std::string::npos);
}

TEST_CASE("run: a card locked by another process is waited for, never shared", "[run]") {
  Project p;
  fs::create_directories(p.locks());
  auto released = (p.dir.path() / "released").string();
  auto rec = (p.dir.path() / "rec").string();
  // The step records whether the outside holder had already let go when the step ran.
  write_project(p.dir, {{"w.yml", "name: w\nsteps:\n  - {devices: 1, run: 'test -e " + released + " && echo after > " + rec +
                                      " || echo during > " + rec + "'}\n"}});
  // Another tool holds card 0 (flock(1) from util-linux, as task-submit would) and marks the moment it lets go.
  std::string lock = pto::CardLock::path_for(p.locks(), 0);
  int pid = fork();
  if (pid == 0) {
    std::string cmd = "sleep 0.5; touch " + released;
    execlp("flock", "flock", lock.c_str(), "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  REQUIRE(wait_until([&] {
    std::string h;
    return pto::CardLock::held_elsewhere(p.locks(), 0, h);
  }, 5));
  CommandResult r = p.run({"--devices", "1"});
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(rec) == "after\n");  // it waited for the outside holder instead of sharing the card
}

TEST_CASE("run: the step environment carries cards, run ids, job and step env", "[run]") {
  Project p;
  auto out = (p.dir.path() / "env").string();
  write_project(p.dir, {{"e.yml", "name: e\nenv: {A: job, B: job}\nsteps:\n  - name: show\n    devices: 2\n"
                                  "    env: {B: step}\n    run: echo \"$TASK_DEVICE|$DEVICE_ID|$A|$B|$PTO_RUNNER_JOB|$PTO_RUNNER_STEP|${PTO_RUNNER_RUN_ID:+set}\" > " + out + "\n"}});
  CommandResult r = p.run({"--devices", "4,5"}, {{"PTO_RUNNER_TOKEN", "hunter2"}, {"PTO_RUNNER_JOB", "stale"}, {"KEEP_ME", "yes"}});
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(out) == "4,5|4|job|step|e|show|set\n");
  // The runner's environment reaches steps, but not an inherited token or another run's ids.
  write_project(p.dir, {{"e.yml", "name: e\nsteps:\n  - run: echo \"${PTO_RUNNER_TOKEN:-unset} $KEEP_ME\" > " + out + "\n"}});
  REQUIRE(p.run({}, {{"PTO_RUNNER_TOKEN", "hunter2"}, {"KEEP_ME", "yes"}}).exit_code == 0);
  CHECK(read_file(out) == "unset yes\n");
}

TEST_CASE("devices: lists cards, drains one with a reason, and returns it to service", "[run]") {
  Project p;
  auto rec = (p.dir.path() / "rec").string();
  write_project(p.dir, {{"d.yml", "name: d\nsteps:\n  - {devices: 1, run: 'echo $TASK_DEVICE >> " + rec + "'}\n"}});
  std::vector<std::string> base = {"devices", "--root", p.dir.str(), "--devices", "2", "--state-dir", p.state(), "--lock-dir", p.locks()};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  CommandResult drained = with({"--drain", "0", "--reason", "ECC errors on the card"});
  CHECK(drained.exit_code == 0);
  CHECK(drained.out.find("0    -      drained   ECC errors on the card") != std::string::npos);
  CHECK(drained.out.find("1    -      free") != std::string::npos);
  REQUIRE(p.run({"--devices", "2"}).exit_code == 0);
  CHECK(read_file(rec) == "1\n");  // the drained card is never handed out
  CommandResult back = with({"--undrain", "0"});
  CHECK(back.out.find("0    -      free") != std::string::npos);
  CHECK(with({"--undrain", "7"}).exit_code == 2);
}

TEST_CASE("run: after an infrastructure failure the health check runs before the card is handed out again", "[run]") {
  Project p;
  auto rec = (p.dir.path() / "rec").string();
  auto checked = (p.dir.path() / "checked").string();
  // One infrastructure failure plus one failed health check reach drain-after: 2.
  p.dir.write("runner.yml", "health: {infra-exit-codes: [42], drain-after: 2, check: 'echo {device} >> " + checked +
                                "; test {device} != 0'}\n");
  write_project(p.dir, {{"h.yml", "name: h\nsteps:\n  - {devices: 1, continue-on-error: true, retry: {max: 0}, run: 'exit 42'}\n"
                                  "  - {devices: 1, run: 'echo $TASK_DEVICE >> " + rec + "'}\n"}});
  CommandResult r = p.run({"--devices", "2"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_file(checked) == "0\n");  // the check ran for the failed card, with {device} filled in
  CHECK(read_file(rec) == "1\n");
  CHECK(read_file(fs::path(p.state()) / "devices.json").find("health check") != std::string::npos);
}

TEST_CASE("run: a health check holds only its own card, other steps go on meanwhile", "[run]") {
  // The check on card 0 waits until the next step, on card 1, has run: it can only succeed if the engine
  // keeps dispatching while the check runs. (It gives up after ~10 s, failing, if the engine were blocked.)
  Project p;
  auto ran = (p.dir.path() / "ran").string();
  auto saw = (p.dir.path() / "saw").string();
  p.dir.write("runner.yml", "health:\n  infra-exit-codes: [42]\n  drain-after: 2\n  check-timeout-seconds: 30\n"
                            "  check: 'for i in $(seq 200); do [ -f " + ran + " ] && echo {device} > " + saw +
                                " && exit 0; sleep 0.05; done; exit 1'\n");
  write_project(p.dir, {{"h.yml", "name: h\nsteps:\n  - {devices: 1, continue-on-error: true, retry: {max: 0}, run: 'exit 42'}\n"
                                  "  - {devices: 1, run: 'echo $TASK_DEVICE > " + ran + "'}\n"}});
  CommandResult r = p.run({"--devices", "2"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(read_file(ran) == "1\n");  // card 0 was still being checked
  CHECK(read_file(saw) == "0\n");  // the check of card 0 saw the other step run, then passed
  CHECK(read_file(fs::path(p.state()) / "devices.json").find("\"0\"") == std::string::npos);  // not drained
}

TEST_CASE("run: a health check that hangs is killed at its timeout and drains the card", "[run]") {
  Project p;
  p.dir.write("runner.yml", "health: {infra-exit-codes: [42], drain-after: 2, check-timeout-seconds: 0.5, "
                            "check: 'sleep 1000'}\n");
  write_project(p.dir, {{"h.yml", "name: h\nsteps:\n  - {devices: 1, retry: {max: 0}, run: 'exit 42'}\n"}});
  CommandResult r = p.run({"--devices", "1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  std::string drained = read_file(fs::path(p.state()) / "devices.json");
  CHECK(drained.find("health check `sleep 1000` failed (timed out") != std::string::npos);
  std::string holder;
  CHECK_FALSE(pto::CardLock::held_elsewhere(p.locks(), 0, holder));
}

TEST_CASE("run: max-parallel bounds concurrent matrix legs and concurrent steps of a parallel job", "[run]") {
  for (const char* kind : {"legs", "steps"}) {
    DYNAMIC_SECTION(kind) {
      Project p;
      auto dir = p.dir.path().string();
      // Each unit marks itself running, records how many are running, and unmarks itself.
      std::string body = "touch " + dir + "/run.$$; ls " + dir + " | grep -c ^run >> " + dir + "/peak; sleep 0.3; rm " + dir + "/run.$$";
      std::string job = std::string(kind) == "legs"
                            ? "name: m\nstrategy:\n  max-parallel: 2\n  matrix:\n    n: [1, 2, 3, 4, 5]\nsteps:\n  - run: \"" + body + "\"\n"
                            : "name: m\nparallel: true\nstrategy:\n  max-parallel: 2\nsteps:\n" + [&] {
                                std::string steps;
                                for (int i = 0; i < 5; ++i) steps += "  - {name: s" + std::to_string(i) + ", run: \"" + body + " # " + std::to_string(i) + "\"}\n";
                                return steps;
                              }();
      write_project(p.dir, {{"m.yml", job}});
      CommandResult r = p.run({});
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      std::istringstream peaks(read_file(p.dir.path() / "peak"));
      int n = 0, max = 0, count = 0;
      while (peaks >> n) max = std::max(max, n), ++count;
      CHECK(count == 5);
      CHECK(max <= 2);
      CHECK(max == 2);  // and the bound is used, not just respected
    }
  }
}

TEST_CASE("run: in a parallel job, if: failure()/always() steps run after the others, with their outcome", "[run]") {
  Project p;
  auto d = p.dir.path().string();
  write_project(p.dir, {{"par.yml", "name: par\nparallel: true\nsteps:\n"
                                    "  - {name: report, if: always(), run: 'test -e " + d + "/slow && test -e " + d + "/bad && touch " + d + "/report'}\n"
                                    "  - {name: on-failure, if: failure(), run: 'touch " + d + "/on-failure'}\n"
                                    "  - {name: slow, run: 'sleep 0.3; touch " + d + "/slow'}\n"
                                    "  - {name: bad, run: 'touch " + d + "/bad; exit 1'}\n"}});
  CommandResult r = p.run({});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(fs::exists(p.dir.path() / "report"));      // it ran, and only after both others had finished
  CHECK(fs::exists(p.dir.path() / "on-failure"));  // it saw the failure of `bad`
}

TEST_CASE("run: a silent step that succeeds leaves no log file, a failed one's log says how it ended", "[run]") {
  Project p;
  write_project(p.dir, {{"q.yml", "name: q\nsteps:\n  - {name: quiet, run: 'true'}\n  - {name: loud, run: 'echo hi'}\n"
                                  "  - {name: sulk, run: 'exit 3'}\n"}});
  CommandResult r = p.run({});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  std::vector<fs::path> logs;
  for (const auto& e : fs::recursive_directory_iterator(p.state()))
    if (e.path().extension() == ".log") logs.push_back(e.path());
  std::set<std::string> names;
  for (const auto& l : logs) names.insert(l.filename().string());
  CHECK(names == std::set<std::string>{"2-loud.log", "3-sulk.log"});
  for (const auto& l : logs) {
    if (l.filename() == "2-loud.log") CHECK(read_file(l) == "hi\n");
    if (l.filename() == "3-sulk.log") CHECK(read_file(l) == "pto-runner: process completed with exit code 3\n");
  }
  CHECK(r.out.find("3-sulk.log") != std::string::npos);  // the failure points at a file that exists
}

TEST_CASE("run: lock-dir and state-dir in runner.yml are relative to --root, not the current directory", "[run]") {
  TempDir dir;
  dir.write("runner.yml", "devices: {ids: [0], lock-dir: host-locks}\nstate-dir: host-state\n");
  write_project(dir, {{"a.yml", "name: a\nsteps:\n  - {devices: 1, run: 'echo hi'}\n"}});
  CommandResult r = run_cli({"run", "--root", dir.str()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(dir.path() / "host-locks" / "npu-0.lock"));
  CHECK(fs::is_directory(dir.path() / "host-state" / "runs"));
  CHECK_FALSE(fs::exists(fs::current_path() / "host-locks"));
}

TEST_CASE("run: queue-timeout-minutes bounds the wait for cards, run-timeout-minutes the run", "[run]") {
  Project p;
  write_project(p.dir, {{"q.yml", "name: q\nparallel: true\nsteps:\n"
                                  "  - {name: holder, devices: 1, run: 'sleep 2'}\n"
                                  "  - {name: waiter, devices: 1, queue-timeout-minutes: 0.01, run: 'echo ran'}\n"
                                  "  - {name: long, run-timeout-minutes: 0.01, run: 'sleep 30'}\n"}});
  CommandResult r = p.run({"--devices", "1"});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("q / waiter: timed_out") != std::string::npos);
  CHECK(r.out.find("waited 0.6 s for 1 card(s) without getting them (queue-timeout-minutes)") != std::string::npos);
  CHECK(r.out.find("[q / waiter] ran") == std::string::npos);  // it never ran
  CHECK(r.out.find("q / long: timed_out") != std::string::npos);
  CHECK(r.out.find("q / holder: succeeded") != std::string::npos);
}

TEST_CASE("run: timeout-minutes counts the wait for cards, as a GitHub step's clock does", "[run]") {
  Project p;
  write_project(p.dir, {{"t.yml", "name: t\nparallel: true\nsteps:\n"
                                  "  - {name: holder, devices: 1, run: 'sleep 1'}\n"
                                  "  - {name: waiter, devices: 1, timeout-minutes: 0.025, run: 'sleep 5'}\n"}});
  CommandResult r = p.run({"--devices", "1"});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  // It got its card after ~1 s of its 1.5 s, so it was killed ~0.5 s into a 5 s run.
  CHECK(r.out.find("t / waiter: timed_out in 0.") != std::string::npos);
}

TEST_CASE("run --simulate: a timeline per card and each step's estimate with where it came from", "[run]") {
  Project p;
  write_project(p.dir, {{"s.yml", "name: s\nparallel: true\nsteps:\n"
                                  "  - {name: known, devices: 1, expected-minutes: 2, run: 'exit 7'}\n"
                                  "  - {name: unknown, devices: 2, run: 'exit 7'}\n"}});
  CommandResult r = p.run({"--simulate", "--devices", "2", "--time-scale", "0.001"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);  // simulated steps never run their commands
  CHECK(r.out.find("Simulated timeline") != std::string::npos);
  CHECK(r.out.find("  card 0   |") != std::string::npos);
  CHECK(r.out.find("s / known  [~2.0 min (expected-minutes)]") != std::string::npos);
  CHECK(r.out.find("s / unknown  [no estimate]") != std::string::npos);
  CHECK(r.out.find("estimates:             1 from expected-minutes, 0 learned from history, 1 none") != std::string::npos);
}
