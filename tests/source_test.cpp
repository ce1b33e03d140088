// Runs of the commit under test (runner.yml `source:`): a bare mirror, one worktree per run, definitions read
// from the commit with the host's settings, and clear refusals. Real git repositories made here; no network.
#include <catch2/catch.hpp>
#include <atomic>

#include <fstream>

#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "served_daemon.h"
#include "source_repo.h"
#include "test_support.h"
#include "util/api_paths.h"
#include "util/state_paths.h"

using namespace pto::test;

namespace {

// Each model example records where it ran and what it saw into $OUT/<example>-<run id>.
const char* kModelsJob = "name: models\nparallel: true\nsteps:\n  - models: [m]\n";
std::string model_file(const std::vector<std::string>& examples) {
  std::string s = "model: M\ndir: ex\ncommand: sh {dir}/{example}.sh\nexamples:\n";
  for (const auto& e : examples) s += "  - {name: " + e + "}\n";
  return s;
}
const char* kExampleScript = "{ pwd; ls ex; } > \"$OUT/$(basename \"$0\" .sh)-$PTO_RUNNER_RUN_ID\"\n";

struct SourceDaemon {
  SourceRepo repo;
  Served served;
  std::string out() const { return (served.dir.path() / "out").string(); }
  void start(const std::string& source_extra = "", const std::string& repo_path = "") {
    fs::create_directories(out());
    served.dir.write("runner.yml", "source:\n  repo: " + (repo_path.empty() ? repo.path() : repo_path) + "\n" + source_extra);
    served.start();
  }
  pto::ApiResponse submit(const std::string& sha) const {
    return served.post(api_path::kRuns, {{"sha", sha}, {"ref", "refs/pull/1/merge"}, {"env", {{"OUT", out()}}}});
  }
  std::vector<std::string> run_dirs() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(pto::runs_dir(served.state()), ec)) out.push_back(e.path().filename().string());
    return out;
  }
  /// Another fetch holding the mirror's lock (flock(1), as a second daemon on the same mirror would), until
  /// let_go(): its pid.
  int hold_mirror_lock() const {
    fs::create_directories(served.state());
    const std::string lock = served.state() + "/source.git.lock";
    int pid = fork();
    if (pid == 0) {
      execlp("flock", "flock", "-o", lock.c_str(), "sleep", "30", (char*)nullptr);
      _exit(127);
    }
    REQUIRE(wait_until([&] { return sh("flock -n " + lock + " true") != 0; }, 10));
    return pid;
  }
  static void let_go(int holder) {
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
  }
};

}  // namespace

TEST_CASE("source: two commits submitted at once each run their own definitions in their own worktree", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/models.yml", kModelsJob);
  d.repo.write("models/m.yml", model_file({"a"}));
  d.repo.write("ex/a.sh", kExampleScript);
  const std::string base = d.repo.commit("base");
  // The second pull request adds a model example.
  d.repo.write("models/m.yml", model_file({"a", "b"}));
  d.repo.write("ex/b.sh", kExampleScript);
  const std::string added = d.repo.commit("add example b");
  d.start();

  pto::ApiResponse ra, rb;
  std::thread ta([&] { ra = d.submit(base); });
  std::thread tb([&] { rb = d.submit(added); });
  ta.join();
  tb.join();
  INFO(ra.body << "\n" << rb.body);
  REQUIRE(ra.status == 201);
  REQUIRE(rb.status == 201);
  std::string ida = json::parse(ra.body)["id"], idb = json::parse(rb.body)["id"];
  CHECK(d.served.wait_run(ida)["state"] == "succeeded");
  json runb = d.served.wait_run(idb);
  CHECK(runb["state"] == "succeeded");
  CHECK(runb["request"]["sha"] == added);
  CHECK(runb["request"]["source"]["worktree"] == pto::run_worktree(pto::run_dir(d.served.state(), idb)));

  const fs::path out(d.out());
  // The new example runs only in the run of the commit that adds it.
  CHECK(fs::exists(out / ("a-" + ida)));
  CHECK_FALSE(fs::exists(out / ("b-" + ida)));
  CHECK(fs::exists(out / ("a-" + idb)));
  CHECK(fs::exists(out / ("b-" + idb)));
  // Each step ran in its run's worktree and saw that commit's files only.
  CHECK(read_file(out / ("a-" + ida)) == pto::run_worktree(pto::run_dir(d.served.state(), ida)) + "\na.sh\n");
  CHECK(read_file(out / ("b-" + idb)) == pto::run_worktree(pto::run_dir(d.served.state(), idb)) + "\na.sh\nb.sh\n");
}

TEST_CASE("source: a commit already in the mirror needs no fetch", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/models.yml", kModelsJob);
  d.repo.write("models/m.yml", model_file({"a"}));
  d.repo.write("ex/a.sh", kExampleScript);
  const std::string sha = d.repo.commit("base");
  d.start();
  auto first = d.submit(sha);
  REQUIRE(first.status == 201);
  d.served.wait_run(json::parse(first.body)["id"]);
  // The repository goes away: the second run of the same commit is served from the mirror.
  fs::rename(d.repo.path(), d.repo.path() + ".gone");
  auto second = d.submit(sha);
  INFO(second.body);
  REQUIRE(second.status == 201);
  CHECK(d.served.wait_run(json::parse(second.body)["id"])["state"] == "succeeded");
}

TEST_CASE("source: a commit whose definitions do not load is refused with its findings", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'true'\n");
  const std::string good = d.repo.commit("good");
  d.repo.write("jobs/bad.yml", "name: bad\nsteps:\n  - run: 'true'\n    devicez: 1\n");
  d.repo.write("jobs/big.yml", "name: big\nsteps:\n  - run: 'true'\n    devices: 3\n");
  const std::string broken = d.repo.commit("broken");
  d.start();

  auto r = d.submit(broken);
  REQUIRE(r.status == 400);
  json body = json::parse(r.body);
  CHECK(body["sha"] == broken);
  REQUIRE(body["findings"].size() == 2);
  CHECK(body["findings"][0]["file"] == "jobs/bad.yml");
  CHECK(body["findings"][0]["line"] == 4);
  CHECK(body["findings"][0]["col"] == 5);
  CHECK(body["findings"][0]["rule"] == "unknown-key");
  // The host's pool (2 cards) is checked against the commit's requests, with lint's message.
  CHECK(body["findings"][1]["file"] == "jobs/big.yml");
  CHECK(body["findings"][1]["rule"] == "devices-exceed-pool");
  CHECK(body["findings"][1]["message"] == "step 'Run true' needs 3 cards; the pool has 2 (0,1)");
  // Nothing of the refused run stays: no run directory, no worktree in the mirror.
  REQUIRE(wait_until([&] { return d.run_dirs().empty(); }, 10));
  std::string worktrees;
  sh("git --git-dir=" + d.served.state() + "/source.git worktree list", &worktrees);
  CHECK(std::count(worktrees.begin(), worktrees.end(), '\n') == 1);  // the bare mirror itself

  // submit inside GitHub Actions: each finding as an annotation at its place, exit 2.
  auto sub = run_cli({"submit", "--server", d.served.url(), "--sha", broken, "--wait"},
                     {{"GITHUB_ACTIONS", "true"}, {"PTO_RUNNER_TOKEN", d.served.token}});
  INFO(sub.out << sub.err);
  CHECK(sub.exit_code == 2);
  CHECK(sub.out.find("::error file=jobs/bad.yml,line=4,col=5::unknown key 'devicez' in step; did you mean 'devices'? [unknown-key]\n") != std::string::npos);
  CHECK(sub.out.find("::error file=jobs/big.yml,line=4,col=14::step 'Run true' needs 3 cards; the pool has 2 (0,1) "
                     "[devices-exceed-pool]") != std::string::npos);
  // The good commit of the same repository still runs.
  auto ok = d.submit(good);
  REQUIRE(ok.status == 201);
  CHECK(d.served.wait_run(json::parse(ok.body)["id"])["state"] == "succeeded");

  // lint against the host's settings gives the same finding locally.
  d.repo.remove("jobs/bad.yml");
  d.served.dir.write("devices.yml", "devices: {ids: [0, 1]}\n");
  auto lint = run_cli({"--root", d.repo.path(), "--config", (d.served.dir.path() / "devices.yml").string(), "lint"});
  CHECK(lint.exit_code == 2);
  CHECK(lint.out.find("jobs/big.yml:4:14: error: step 'Run true' needs 3 cards; the pool has 2 (0,1) [devices-exceed-pool]") !=
        std::string::npos);
}

TEST_CASE("source: unknown commits, bad shas and an unreachable repository are clear errors", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'true'\n");
  d.repo.commit("good");
  d.start();
  const std::string missing(40, 'e');
  auto r = d.submit(missing);
  REQUIRE(r.status == 400);
  CHECK(json::parse(r.body)["error"] == "commit " + missing + " does not exist in " + d.repo.path());
  CHECK(json::parse(r.body)["field"] == "sha");
  auto shortsha = d.submit("abc123");
  REQUIRE(shortsha.status == 400);
  CHECK(json::parse(shortsha.body)["error"].get<std::string>().find("not a full commit id") != std::string::npos);
  auto none = d.served.post(api_path::kRuns, json::object());
  REQUIRE(none.status == 400);
  CHECK(json::parse(none.body)["field"] == "sha");
  REQUIRE(wait_until([&] { return d.run_dirs().empty(); }, 10));

  SourceDaemon gone;
  gone.start("", (gone.served.dir.path() / "no-such-repo").string());
  auto g = gone.submit(missing);
  REQUIRE(g.status == 503);
  CHECK(json::parse(g.body)["error"].get<std::string>().find("cannot reach the source repository " +
                                                             (gone.served.dir.path() / "no-such-repo").string()) == 0);
  auto sub = run_cli({"submit", "--server", gone.served.url(), "--sha", missing, "--wait"}, {{"PTO_RUNNER_TOKEN", gone.served.token}});
  CHECK(sub.exit_code == 3);
  CHECK_FALSE(fs::exists(gone.served.state() + "/source.git"));  // no empty mirror left by a first fetch that failed

  // A `mirror:` naming a directory that holds something else: refused, and nothing in it touched.
  SourceDaemon elsewhere;
  const fs::path theirs = elsewhere.served.dir.path() / "theirs";
  fs::create_directories(theirs);
  std::ofstream((theirs / "keep").string()) << "mine";
  elsewhere.start("  mirror: " + theirs.string() + "\n", (elsewhere.served.dir.path() / "no-such-repo").string());
  auto e = elsewhere.submit(missing);
  CHECK(e.status != 201);
  CHECK(e.body.find("is neither a git mirror nor an empty directory") != std::string::npos);
  CHECK(read_file(theirs / "keep") == "mine");
}

TEST_CASE("source: lock files a killed fetch left in the mirror are cleared before the next fetch", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'true'\n");
  const std::string first = d.repo.commit("first");
  d.start();
  auto r = d.submit(first);
  REQUIRE(r.status == 201);
  REQUIRE(d.served.wait_run(json::parse(r.body)["id"])["state"] == "succeeded");
  // What `git fetch` killed at fetch-timeout-seconds leaves: ref and packed-refs locks.
  const std::string mirror = d.served.state() + "/source.git";
  fs::create_directories(mirror + "/refs/heads");
  // Left by a fetch long gone (older than a whole fetch may take); a fresh one may be a step's own git's.
  for (const std::string lock : {mirror + "/packed-refs.lock", mirror + "/refs/heads/main.lock"}) {
    std::ofstream(lock) << "";
    fs::last_write_time(lock, fs::file_time_type::clock::now() - std::chrono::hours(3));
  }
  const std::string fresh = mirror + "/refs/heads/busy.lock";
  std::ofstream(fresh) << "";
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'echo second'\n");
  const std::string second = d.repo.commit("second");
  auto again = d.submit(second);
  REQUIRE(again.status == 201);
  CHECK(d.served.wait_run(json::parse(again.body)["id"])["state"] == "succeeded");
  CHECK_FALSE(fs::exists(mirror + "/packed-refs.lock"));
  CHECK_FALSE(fs::exists(mirror + "/refs/heads/main.lock"));
  CHECK(fs::exists(fresh));
}

TEST_CASE("source: a mirror locked by another fetch is waited for, then refused, nothing half made", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'true'\n");
  const std::string sha = d.repo.commit("good");
  d.start("  lock-timeout-seconds: 0.5\n");
  int holder = d.hold_mirror_lock();
  auto r = d.submit(sha);
  SourceDaemon::let_go(holder);
  REQUIRE(r.status == 503);
  CHECK(json::parse(r.body)["error"].get<std::string>().find("the source mirror is locked by another fetch") == 0);
  REQUIRE(wait_until([&] { return d.run_dirs().empty(); }, 10));
  // Once the other fetch is done, the same commit runs.
  auto again = d.submit(sha);
  REQUIRE(again.status == 201);
  CHECK(d.served.wait_run(json::parse(again.body)["id"])["state"] == "succeeded");
}

TEST_CASE("source: submissions waiting for a locked mirror never hold up reads of logs and runs", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'echo readable'\n");
  const std::string sha = d.repo.commit("good");
  d.start("  lock-timeout-seconds: 8\n");
  auto first = d.submit(sha);
  REQUIRE(first.status == 201);
  const std::string id = json::parse(first.body)["id"];
  REQUIRE(d.served.wait_run(id)["state"] == "succeeded");
  int holder = d.hold_mirror_lock();
  // More submissions than the daemon has threads for blocking work, all waiting for the mirror.
  std::atomic<int> answered{0};
  std::vector<std::thread> waiting;
  for (int i = 0; i < 6; ++i) waiting.emplace_back([&] {
    d.submit(sha);
    ++answered;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto log = pto::api_request("GET", d.served.url(api_path::step_log(id, "1-1")));
  auto run = pto::api_request("GET", d.served.url(api_path::run(id)));
  const int answered_before_reads = answered;
  SourceDaemon::let_go(holder);
  for (auto& t : waiting) t.join();
  CHECK(log.status == 200);
  CHECK(log.body == "readable\n");
  CHECK(run.status == 200);
  CHECK(answered_before_reads == 0);  // the reads were answered while every submission still waited
}

TEST_CASE("source: old worktrees and runs are pruned by keep-worktrees and retention, logs stay with their run", "[source]") {
  SourceDaemon d;
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'echo hi'\n");
  const std::string sha = d.repo.commit("good");
  d.start("  keep-worktrees: 1\nretention:\n  max-runs: 2\n");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    // Each run runs its step (not reused from the one before), so each has a log of its own.
    auto r = d.served.post(api_path::kRuns, {{"sha", sha}, {"ref", "refs/pull/1/merge"}, {"reuse", false}});
    REQUIRE(r.status == 201);
    ids.push_back(json::parse(r.body)["id"]);
    d.served.wait_run(ids.back());
  }
  const std::string runs = pto::runs_dir(d.served.state()) + "/";
  // The oldest run is past max-runs: record and directory gone.
  REQUIRE(wait_until([&] { return !fs::exists(runs + ids[0]); }, 10));
  CHECK(pto::api_request("GET", d.served.url(api_path::run(ids[0]))).status == 404);
  // The second keeps its record and log but not its worktree; the newest keeps everything.
  REQUIRE(wait_until([&] { return !fs::exists(runs + ids[1] + "/src"); }, 10));
  CHECK(d.served.get(api_path::run(ids[1]))["state"] == "succeeded");
  CHECK(pto::api_request("GET", d.served.url(api_path::step_log(ids[1], "1-1"))).body == "hi\n");
  CHECK(fs::exists(runs + ids[2] + "/src/jobs/ok.yml"));
  std::string worktrees;
  sh("git --git-dir=" + d.served.state() + "/source.git worktree list", &worktrees);
  CHECK(std::count(worktrees.begin(), worktrees.end(), '\n') == 2);  // the mirror and the newest run's
}

TEST_CASE("source: the worktree has the commit's submodules from the allowed place (source.submodule-urls)", "[source]") {
  SourceDaemon d;
  const std::string lib = (d.repo.dir.path() / "lib").string();
  REQUIRE(sh("git init -q -b main " + lib + " && echo from-submodule > " + lib + "/VERSION && cd " + lib +
             " && git add -A && git -c user.name=t -c user.email=t@example.com commit -q -m lib") == 0);
  REQUIRE(sh("cd " + d.repo.path() + " && git -c protocol.file.allow=always submodule add -q " + lib + " third_party/lib") == 0);
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'cat third_party/lib/VERSION > \"$OUT/sub\"'\n");
  const std::string sha = d.repo.commit("with a submodule");
  d.start("  submodule-urls: [" + d.repo.dir.str() + "]\n");
  auto r = d.submit(sha);
  INFO(r.body);
  REQUIRE(r.status == 201);
  CHECK(d.served.wait_run(json::parse(r.body)["id"])["state"] == "succeeded");
  CHECK(read_file(fs::path(d.out()) / "sub") == "from-submodule\n");
}

TEST_CASE("source: a commit whose .gitmodules names a root-only repository of the host is refused with the submodule's "
          "name, and nothing of that repository reaches a run",
          "[source]") {
  SourceDaemon d;
  // A repository only root may read, with a secret in it; the pull request names it by its path.
  TempDir host;
  const std::string secret = (host.path() / "secret").string();
  REQUIRE(sh("git init -q -b main " + secret + " && echo the-host-secret > " + secret + "/KEY && cd " + secret +
             " && git add -A && git -c user.name=t -c user.email=t@example.com commit -q -m s && chmod 700 " + secret) == 0);
  REQUIRE(sh("cd " + d.repo.path() + " && git -c protocol.file.allow=always submodule add -q " + secret + " third_party/x") == 0);
  d.repo.write("jobs/ok.yml", "name: ok\nsteps:\n  - run: 'cat third_party/x/KEY > \"$OUT/leaked\"'\n");
  const std::string sha = d.repo.commit("a submodule that reads the host");
  // The same commit through a relative URL: resolved against the source repository, still a local path.
  d.repo.write(".gitmodules", "[submodule \"third_party/x\"]\n\tpath = third_party/x\n\turl = ../../" +
                                  host.path().filename().string() + "/secret\n");
  const std::string relative = d.repo.commit("the same by a relative URL");
  d.start();
  for (const std::string& commit : {sha, relative}) {
    INFO(commit);
    auto r = d.submit(commit);
    INFO(r.body);
    CHECK(r.status == 400);
    CHECK(r.body.find("submodule 'third_party/x' names") != std::string::npos);
    CHECK(r.body.find("a path on the daemon's host") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(fs::path(d.out()) / "leaked"));
  std::string found;
  sh("grep -rl the-host-secret " + d.served.state() + " 2>/dev/null", &found);
  CHECK(found.empty());
  // submit says so and exits 2 (the request's fault).
  CommandResult sub = run_cli({"submit", "--server", d.served.url(), "--sha", sha}, {{"PTO_RUNNER_TOKEN", d.served.token}});
  CHECK(sub.exit_code == 2);
  CHECK(sub.out.find("submodule 'third_party/x'") != std::string::npos);
}

