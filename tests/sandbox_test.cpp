// A step cannot touch the daemon, the host or another run (SPEC): with real sandbox users made by the test
// (`pto-runner sandbox setup`, removed after), a hostile step of one run attacks another run that is running
// at the same time, and everything it tries is refused. Root only: making users and switching to them needs it.
// The cards are plain files standing in for /dev/davinci*.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "sandbox_users.h"
#include "served_daemon.h"
#include "source_repo.h"
#include "util/random_hex.h"
#include "util/api_paths.h"

using namespace pto::test;

namespace {

/// A directory every run's user may write (sticky, as /tmp), where steps leave marks for the test.
std::string shared_dir(const TempDir& dir, const std::string& name) {
  const fs::path p = dir.path() / name;
  fs::create_directories(p);
  ::chmod(p.c_str(), 01777);
  return p.string();
}

/// Plain files standing in for /dev/davinci0, /dev/davinci1 and /dev/davinci_manager (no NPU here), root's
/// and closed to others as on a host: what a step may open, it opens by the ACL entry the daemon gives.
fs::path stand_in_cards(const TempDir& dir) {
  for (const char* f : {"davinci0", "davinci1", "davinci_manager"}) {
    const fs::path p = dir.write(std::string("dev/") + f, "stand-in\n");
    ::chmod(p.c_str(), 0600);
  }
  return dir.path() / "dev";
}


std::string step_log(const json& run, int job = 0, int step = 0) {
  return read_file(run["jobs"][job]["steps"][step]["log_path"].get<std::string>());
}

}  // namespace

TEST_CASE("sandbox: a hostile step of one run against another running at the same time: every attack is refused, "
          "the victim succeeds with its own log, the daemon lives, nothing of the attacker is left", "[sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  const fs::path dev = stand_in_cards(s.dir);
  SandboxUsers users(s.dir, 2,
                     "  pids-max: 512\ndevices:\n  card-files: " + (dev / "davinci{id}").string() + "\n  shared-files: [" +
                         (dev / "davinci_manager").string() + "]\n");
  const std::string marks = shared_dir(s.dir, "marks");
  // The victim holds one card, a secret and a lease token, and writes its output while the attacker runs.
  write_project(s.dir, {{"victim.yml", "name: victim\nsteps:\n  - id: v\n    devices: 1\n    run: |\n"
                                       "      echo \"victim uid $(id -u)\"\n"
                                       "      echo $$ > " + marks + "/victim.pid\n"
                                       "      for i in $(seq 100); do [ -e " + marks + "/attacker.done ] && break; sleep 0.1; done\n"
                                       "      echo \"ok=yes\" >> \"$GITHUB_OUTPUT\"\n"
                                       "      echo victim-end\n"},
                        {"attacker.yml", "name: attacker\nsteps:\n  - id: a\n    devices: 1\n    run: bash " +
                                             (s.dir.path() / "attack.sh").string() + "\n"}});
  s.dir.write("attack.sh", R"SH(
state="$STATE"; victim="$VICTIM"
try() { name=$1; shift; if ( "$@" ) >/dev/null 2>&1; then echo "ATTACK $name: WORKED"; else echo "ATTACK $name: refused"; fi; }
echo "attacker uid $(id -u)"
try read-token cat "$state/token"
try read-journal cat "$state/journal.sqlite"
try list-runs ls "$state/runs"
try read-victim-log sh -c "cat $state/runs/$victim/logs/*/*.log"
try forge-victim-log sh -c "echo 'all tests passed' >> $state/runs/$victim/logs/1-victim/1-v.log"
try victim-files ls "$state/runs/$victim/files"
try victim-home ls "$state/runs/$victim/home"
try victim-environ sh -c "cat /proc/$(cat $MARKS/victim.pid)/environ | grep -q PTO_RUNNER_LEASE_TOKEN"
try kill-victim kill -9 "$(cat $MARKS/victim.pid)"
try kill-daemon kill -9 "$DAEMON"
try fill-state-dir dd if=/dev/zero of="$state/filler" bs=1M count=8
try rewrite-jobs sh -c "echo 'steps: []' >> $ROOT/jobs/victim.yml"
mine=$TASK_DEVICE; other=$((1 - mine))
try lock-file sh -c "exec 9<> $LOCKS/npu-$other.lock"
try other-card sh -c "exec 9<> $DEV/davinci$other"
try leave-cgroup sh -c 'p=$(sed -n "s/^0:://p" /proc/self/cgroup); echo $$ > /sys/fs/cgroup/unified$(dirname $p)/cgroup.procs'
try drain-card python3 -c 'import os, sys, urllib.request as u; r = u.Request(os.environ["PTO_RUNNER_SERVER"] + "/api/v1/devices/" + sys.argv[1] + "/drain", data=b"{}", method="POST", headers={"Authorization": "Bearer " + os.environ["PTO_RUNNER_LEASE_TOKEN"]}); u.urlopen(r)' "$other"
# What it is allowed: its own card and the shared control file, its own tree.
if ( exec 9<> "$DEV/davinci$mine" ) 2>/dev/null; then echo "OWN card opened"; fi
if ( exec 9<> "$DEV/davinci_manager" ) 2>/dev/null; then echo "SHARED file opened"; fi
echo "daemon env: ${PTO_TEST_DAEMON_ONLY:-absent}"
# A leftover that tries to outlive the step, and a file for the next run of this user.
setsid sleep 1000 &
echo planted > /tmp/ptsb-planted-$$
touch "$MARKS/attacker.done"
)SH");
  s.env["PTO_TEST_DAEMON_ONLY"] = "the daemon's own environment";
  s.start();
  const std::string victim = s.submit_run({{"jobs", {"victim"}}, {"secrets", {{"VICTIM_SECRET", "victim-secret-value"}}}});
  REQUIRE(wait_for_content(marks + "/victim.pid"));
  const std::string attacker =
      s.submit_run({{"jobs", {"attacker"}},
                    {"env",
                     {{"STATE", s.state()}, {"VICTIM", victim}, {"MARKS", marks}, {"DAEMON", std::to_string(s.proc.pid)},
                      {"ROOT", s.dir.str()}, {"LOCKS", s.locks()}, {"DEV", dev.string()}}}});
  json a = s.wait_run(attacker, 60), v = s.wait_run(victim, 60);
  const std::string alog = step_log(a), vlog = step_log(v);
  INFO(alog);
  INFO(vlog);
  CHECK(a["state"] == "succeeded");
  CHECK(alog.find("WORKED") == std::string::npos);
  for (const char* attack : {"read-token", "read-journal", "list-runs", "read-victim-log", "forge-victim-log", "victim-files",
                             "victim-home", "victim-environ", "kill-victim", "kill-daemon", "fill-state-dir", "rewrite-jobs",
                             "lock-file", "other-card", "leave-cgroup", "drain-card"})
    CHECK(alog.find(std::string("ATTACK ") + attack + ": refused") != std::string::npos);
  CHECK(alog.find("OWN card opened") != std::string::npos);
  CHECK(alog.find("SHARED file opened") != std::string::npos);
  CHECK(alog.find("daemon env: absent") != std::string::npos);
  // The victim: succeeded, its log its own, its output taken.
  CHECK(v["state"] == "succeeded");
  CHECK(v["jobs"][0]["steps"][0]["outputs"]["ok"] == "yes");
  CHECK(vlog.find("victim-end") != std::string::npos);
  CHECK(vlog.find("all tests passed") == std::string::npos);
  // Two runs, two users, neither the daemon.
  auto uid_in = [](const std::string& log, const std::string& who) {
    auto p = log.find(who + " uid ");
    return p == std::string::npos ? -1 : std::stoi(log.substr(p + who.size() + 5));
  };
  const int vu = uid_in(vlog, "victim"), au = uid_in(alog, "attacker");
  CHECK(vu > 0);
  CHECK(au > 0);
  CHECK(vu != au);
  CHECK((static_cast<uid_t>(vu) == users.uid(0) || static_cast<uid_t>(vu) == users.uid(1)));
  // The daemon lives and the state dir holds nothing the attacker wrote.
  CHECK(pid_running(s.proc.pid));
  CHECK(s.get(api_path::kStatus)["sandbox"]["active"] == true);
  CHECK_FALSE(fs::exists(fs::path(s.state()) / "filler"));
  // Nothing of the attacker is left: its escaped sleep and its /tmp file went with its user's return (a worker
  // sweeps them after the run's end, then the user goes back).
  std::string left, left_files, acl;
  auto attacker_gone = [&] {
    sh("pgrep -u " + std::to_string(au) + " || true", &left);
    sh("find /tmp -maxdepth 1 -user " + std::to_string(au) + " || true", &left_files);
    sh("getfacl -cp " + dev.string() + "/davinci0 " + dev.string() + "/davinci1 " + dev.string() + "/davinci_manager 2>/dev/null", &acl);
    return left.empty() && left_files.empty() && acl.find("user:" + users.prefix) == std::string::npos;
  };
  wait_until(attacker_gone, 20);
  CHECK(left.empty());
  CHECK(left_files.empty());
  // The cards' files are closed again: no ACL entry of a run's user is left on them.
  CHECK(acl.find("user:" + users.prefix) == std::string::npos);
  CHECK(acl.find("user:" + std::to_string(au)) == std::string::npos);
}

TEST_CASE("sandbox: a step over pids-max or memory-max fails with that reason in its log, and the next run runs", "[sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 1, "  pids-max: 64\n  memory-max: 64M\n");
  write_project(s.dir, {{"bomb.yml", "name: bomb\nsteps:\n  - id: b\n    run: |\n"
                                     "      for i in $(seq 200); do sleep 30 & done\n"
                                     "      wait\n"},
                        {"hog.yml", "name: hog\nsteps:\n  - id: h\n    run: python3 -c 'x = bytearray(512 << 20); print(len(x))'\n"},
                        {"fine.yml", "name: fine\nsteps:\n  - id: f\n    run: echo fine\n"}});
  s.start();
  json bomb = s.wait_run(s.submit_run({{"jobs", {"bomb"}}}), 60);
  INFO(bomb.dump(2));
  CHECK(bomb["state"] == "failed");
  CHECK(step_log(bomb).find("pids-max (64 processes)") != std::string::npos);
  json hog = s.wait_run(s.submit_run({{"jobs", {"hog"}}}), 60);
  INFO(hog.dump(2));
  CHECK(hog["state"] == "failed");
  CHECK(step_log(hog).find("memory-max (64 MiB)") != std::string::npos);
  // One user, lent again to each run in turn; the host goes on.
  json fine = s.wait_run(s.submit_run({{"jobs", {"fine"}}}), 60);
  INFO(fine.dump(2));
  CHECK(fine["state"] == "succeeded");
}

TEST_CASE("sandbox: a $GITHUB_OUTPUT that is a link to a root-only file is refused, not read", "[sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 1);
  const fs::path secret = s.dir.write("root-only", "leaked=root-only-content\n");
  ::chmod(secret.c_str(), 0600);
  write_project(s.dir, {{"link.yml", "name: link\nsteps:\n  - id: l\n    run: ln -sf " + secret.string() + " \"$GITHUB_OUTPUT\"\n"}});
  s.start();
  json run = s.wait_run(s.submit_run({{"jobs", {"link"}}}), 60);
  INFO(run.dump(2));
  CHECK(run["state"] == "failed");
  CHECK(run.dump().find("root-only-content") == std::string::npos);
  CHECK(run["jobs"][0]["steps"][0]["error"].get<std::string>().find("is a symbolic link") != std::string::npos);
}

TEST_CASE("sandbox: what a run's user leaves (SysV shared memory, semaphores and queues, a POSIX queue, files in every "
          "world-writable directory) is gone after its run, and it can open none of pto-runner's lock files",
          "[sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 1);
  const std::string tag = pto::random_hex(4);
  const std::vector<std::string> files = {"/tmp/left-" + tag, "/var/tmp/left-" + tag, "/dev/shm/left-" + tag, "/run/lock/left-" + tag,
                                          "/tmp/leftdir-" + tag};
  std::string script =
      "ipcmk -M 4096 && ipcmk -S 2 && ipcmk -Q\n"
      "/usr/bin/python3 -c 'import ctypes, os; rt = ctypes.CDLL(\"librt.so.1\"); "
      "print(\"mq\", rt.mq_open(b\"/ptoq-" + tag + "\", os.O_CREAT | os.O_RDWR, 0o600, None))'\n"
      "touch " + files[0] + " " + files[1] + " " + files[2] + " " + files[3] + " && mkdir " + files[4] + " && touch " + files[4] + "/x\n"
      // Every lock file pto-runner made: the daemon's, the cards', the sandbox users'.
      "for f in " + s.state() + "/daemon.lock " + s.locks() + "/*.lock; do\n"
      "  if ( exec 3<\"$f\" ) 2>/dev/null; then echo \"OPENED $f\"; else echo \"refused $f\"; fi\n"
      "done\n";
  write_project(s.dir, {{"leave.yml", "name: leave\nsteps:\n  - name: leave\n    devices: 1\n    run: |\n" + [&] {
                           std::string indented;
                           std::istringstream in(script);
                           for (std::string line; std::getline(in, line);) indented += "      " + line + "\n";
                           return indented;
                         }()}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"leave"}}});
  json run = s.wait_run(id, 60);
  const std::string log = pto::api_request("GET", s.url(api_path::step_log(id, "1-1"))).body;
  INFO(run.dump(2) << log);
  REQUIRE(run["state"] == "succeeded");
  CHECK(log.find("mq ") != std::string::npos);
  CHECK(log.find("mq -1") == std::string::npos);  // the queue was made
  CHECK(log.find("OPENED") == std::string::npos);
  CHECK(log.find("refused " + s.state() + "/daemon.lock") != std::string::npos);
  CHECK(log.find("refused " + s.locks() + "/npu-0.lock") != std::string::npos);
  // The user is given back once the run has ended: then nothing of it is left.
  const uid_t uid = users.uid(0);
  auto sysv_of_user = [&] {
    int n = 0;
    for (const char* kind : {"shm", "sem", "msg"}) {
      std::ifstream in(std::string("/proc/sysvipc/") + kind);
      std::string header, line;
      std::getline(in, header);
      while (std::getline(in, line)) n += line.find(" " + std::to_string(uid) + " ") != std::string::npos;
    }
    return n;
  };
  auto gone = [&] {
    for (const auto& f : files)
      if (fs::exists(f)) return false;
    return sysv_of_user() == 0 && sh("/usr/bin/python3 -c 'import ctypes, os, sys; rt = ctypes.CDLL(\"librt.so.1\"); "
                                     "sys.exit(0 if rt.mq_open(b\"/ptoq-" + tag + "\", os.O_RDWR) < 0 else 1)'") == 0;
  };
  CHECK(wait_until(gone, 20));
  for (const auto& f : files) CHECK_FALSE(fs::exists(f));
  CHECK(sysv_of_user() == 0);
}

TEST_CASE("sandbox: a leased command runs as the run's user and may open its leased card's file only while it holds it", "[sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  const fs::path dev = stand_in_cards(s.dir);
  SandboxUsers users(s.dir, 1, "devices:\n  card-files: " + (dev / "davinci{id}").string() + "\n");
  write_project(s.dir, {{"lease.yml", "name: lease\nsteps:\n  - id: l\n    run: |\n"
                                      "      task-submit --device-num 1 --run 'echo \"leased as $(id -un) card $TASK_DEVICE\"; "
                                      "exec 9<> " + dev.string() + "/davinci$TASK_DEVICE && echo LEASED-OPEN'\n"
                                      "      ( exec 9<> " + dev.string() + "/davinci0 ) 2>/dev/null && echo AFTER-OPEN0\n"
                                      "      ( exec 9<> " + dev.string() + "/davinci1 ) 2>/dev/null && echo AFTER-OPEN1\n"
                                      "      true\n"}});
  s.start();
  json run = s.wait_run(s.submit_run({{"jobs", {"lease"}}}), 60);
  const std::string log = step_log(run);
  INFO(log);
  CHECK(run["state"] == "succeeded");
  CHECK(log.find("leased as " + users.prefix + "0 card ") != std::string::npos);
  CHECK(log.find("LEASED-OPEN") != std::string::npos);
  CHECK(log.find("AFTER-OPEN") == std::string::npos);  // the lease ended: its card's file is closed again
}

TEST_CASE("sandbox: a commit's step owns its worktree and runs git there, cannot write the mirror, and no hook in the "
          "mirror runs at the next checkout", "[sandbox][source]") {
  SKIP_UNLESS_ROOT();
  SourceRepo repo;
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 1, "source:\n  repo: " + repo.path() + "\n");
  const std::string ran = (s.dir.path() / "hook-ran").string();
  repo.write("jobs/g.yml", "name: g\nsteps:\n  - id: g\n    run: |\n"
                           "      git status --short > /dev/null && git log --oneline -1 && echo GIT-OK\n"
                           "      echo mine > own-file && echo TREE-WRITABLE\n"
                           "      ( echo 'touch " + ran + "' > \"$STATE/source.git/hooks/post-checkout\" ) 2>/dev/null && echo HOOK-WRITTEN\n"
                           "      ( echo x > \"$STATE/source.git/config\" ) 2>/dev/null && echo CONFIG-WRITTEN\n"
                           "      true\n");
  const std::string first = repo.commit("first");
  s.start();
  auto submit = [&](const std::string& sha) {
    auto r = s.post(api_path::kRuns, {{"sha", sha}, {"env", {{"STATE", s.state()}}}});
    INFO(r.body);
    REQUIRE(r.status == 201);
    return json::parse(r.body)["id"].get<std::string>();
  };
  json run = s.wait_run(submit(first), 60);
  std::string log = step_log(run);
  INFO(log);
  CHECK(run["state"] == "succeeded");
  CHECK(log.find("GIT-OK") != std::string::npos);
  CHECK(log.find("TREE-WRITABLE") != std::string::npos);
  CHECK(log.find("HOOK-WRITTEN") == std::string::npos);
  CHECK(log.find("CONFIG-WRITTEN") == std::string::npos);
  // Even a hook that is there (planted as root here) never runs: the daemon's git runs no hooks.
  s.dir.write("hook", "#!/bin/sh\ntouch " + ran + "\n");
  REQUIRE(sh("install -m 0755 " + (s.dir.path() / "hook").string() + " " + s.state() + "/source.git/hooks/post-checkout") == 0);
  repo.write("README", "second\n");
  json second = s.wait_run(submit(repo.commit("second")), 60);
  CHECK(second["state"] == "succeeded");
  CHECK_FALSE(fs::exists(ran));
}

TEST_CASE("sandbox: runs beyond the pool wait for a free sandbox user and then run as it", "[sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 1);
  const std::string marks = shared_dir(s.dir, "marks");
  write_project(s.dir, {{"hold.yml", "name: hold\nsteps:\n  - id: h\n    run: |\n      touch " + marks + "/held\n"
                                     "      for i in $(seq 100); do [ -e " + marks + "/go ] && break; sleep 0.1; done\n"},
                        {"next.yml", "name: next\nsteps:\n  - id: n\n    run: id -un\n"}});
  s.start();
  const std::string first = s.submit_run({{"jobs", {"hold"}}});
  REQUIRE(wait_until([&] { return fs::exists(marks + "/held"); }, 30));
  const std::string second = s.submit_run({{"jobs", {"next"}}});
  json status;
  REQUIRE(wait_until([&] {
    status = s.get(api_path::kStatus);
    return status["sandbox"]["waiting"].size() == 1;
  }, 10));
  CHECK(status["sandbox"]["waiting"][0] == second);
  CHECK(status["sandbox"]["lent"] == 1);
  s.dir.write("marks/go", "1");
  CHECK(s.wait_run(first, 60)["state"] == "succeeded");
  json run = s.wait_run(second, 60);
  CHECK(run["state"] == "succeeded");
  CHECK(step_log(run).find(users.prefix + "0") != std::string::npos);
}

TEST_CASE("sandbox: a foreground `run` as root lends a sandbox user too, never one the host's daemon has lent", "[sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 2);
  const std::string marks = shared_dir(s.dir, "marks");
  write_project(s.dir, {{"hold.yml", "name: hold\nsteps:\n  - id: h\n    run: |\n      echo \"held by $(id -un)\" > " + marks + "/held\n"
                                     "      for i in $(seq 200); do [ -e " + marks + "/go ] && break; sleep 0.1; done\n"},
                        {"who.yml", "name: who\nsteps:\n  - id: w\n    run: echo \"who $(id -un) home $HOME\"\n"}});
  s.start();
  const std::string held = s.submit_run({{"jobs", {"hold"}}});
  REQUIRE(wait_for_content(marks + "/held", 30));
  const std::string daemon_user = read_file(marks + "/held").substr(8, users.prefix.size() + 1);
  CommandResult r = run_cli({"--root", s.dir.str(), "run", "--job", "who", "--lock-dir", s.locks(), "--state-dir",
                             (s.dir.path() / "run-state").string(), "--devices", "2"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const std::string other = daemon_user == users.prefix + "0" ? users.prefix + "1" : users.prefix + "0";
  CHECK(r.out.find("who " + other + " home " + (s.dir.path() / "run-state").string()) != std::string::npos);
  s.dir.write("marks/go", "1");
  CHECK(s.wait_run(held, 60)["state"] == "succeeded");
}

TEST_CASE("sandbox: a foreground `run` as root without runner.yml's sandbox users says NO SANDBOX and runs as root", "[sandbox]") {
  SKIP_UNLESS_ROOT();
  TempDir d;
  d.write("runner.yml", "sandbox:\n  users: ptsbnobody-\n  count: 2\n");
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: echo \"uid $(id -u)\"\n"}});
  CommandResult r = run_cli({"--root", d.str(), "run", "--lock-dir", (d.path() / "locks").string(), "--state-dir",
                             (d.path() / "state").string(), "--devices", "1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("NO SANDBOX: the steps run as root") != std::string::npos);
  CHECK(r.err.find("do not exist") != std::string::npos);  // and why
  CHECK(r.out.find("uid 0") != std::string::npos);
  // `sandbox: off` is asked for, not missing: nothing said.
  d.write("runner.yml", "sandbox: off\n");
  r = run_cli({"--root", d.str(), "run", "--lock-dir", (d.path() / "locks").string(), "--state-dir",
               (d.path() / "state").string(), "--devices", "1"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("NO SANDBOX") == std::string::npos);
}

TEST_CASE("sandbox: without sandbox users the daemon says so at start, in the status and on the page", "[sandbox]") {
  Served s;
  s.dir.write("runner.yml", "sandbox:\n  users: ptsbnobody-\n  count: 2\n");
  write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - run: echo hi\n"}});
  s.start();
  CHECK(read_file(s.proc.err).find("NO SANDBOX") != std::string::npos);
  json sb = s.get(api_path::kStatus)["sandbox"];
  CHECK(sb["active"] == false);
  CHECK(sb["why_not"].get<std::string>().find(::geteuid() == 0 ? "do not exist" : "not root") != std::string::npos);
  std::string dom;
  if (s.page_dom(dom)) CHECK(dom.find("No sandbox: pull requests' steps run as the daemon's own user") != std::string::npos);
}
