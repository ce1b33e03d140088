// `pto-runner serve`, `submit` and `status` against a real daemon on a loopback port: the status shape, auth,
// bad requests, concurrency, slow clients, submit's exit codes and cancel, and recovery after SIGKILL.
#include <arpa/inet.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/api_client.h"
#include "sched/card_lock.h"
#include "gha_parser.h"
#include "served_daemon.h"
#include "test_support.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

void sleepy_project(const TempDir& d, const std::string& marks) {
  write_project(d, {{"slow.yml", "name: slow\nparallel: true\nsteps:\n"
                                 "  - {name: one, devices: 1, expected-minutes: 1, run: 'echo $$ > " + marks + "/one.pid; sleep 1000'}\n"
                                 "  - {name: two, devices: 1, expected-minutes: 1, run: 'echo $$ > " + marks + "/two.pid; setsid sleep 1000 & echo $! > " + marks + "/two.escapee; sleep 1000'}\n"
                                 "  - {name: three, devices: 2, run: 'sleep 1000'}\n"},
                    {"quick.yml", "name: quick\nsteps:\n  - {name: ok, devices: 1, run: 'echo fine'}\n"},
                    {"quiet.yml", "name: quiet\nsteps:\n  - {name: silent, run: 'true'}\n"},
                    {"broken.yml", "name: broken\nsteps:\n  - {name: bad, devices: 1, run: 'echo going wrong; echo really; exit 4'}\n"}});
}

}  // namespace

TEST_CASE("serve: status has every field with the right types, during and after a run", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  s.start();
  std::string id = s.submit_run({{"jobs", {"slow"}}, {"ref", "refs/heads/main"}, {"sha", "abc123"}, {"env", {{"SECRET", "hunter2"}}}});
  REQUIRE(wait_until([&] { return fs::exists(s.dir.path() / "two.escapee"); }));
  // The status is a read model refreshed right after transitions: wait for it to show both steps started.
  json st;
  REQUIRE(wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["devices"][0]["state"] == "busy" && st["devices"][1]["state"] == "busy" && st["queue"].size() == 1;
  }, 5));
  CHECK(st["version"].is_string());
  CHECK(st["uptime_seconds"].is_number());
  CHECK(st["toolchain"]["pin"]["version"] == "v0.52");
  CHECK(st["toolchain"]["state"].is_string());
  REQUIRE(st["devices"].size() == 2);
  for (const auto& d : st["devices"]) {
    CHECK(d["id"].is_number_integer());
    CHECK(d["state"] == "busy");
    CHECK(d["holder"]["run"] == id);
    CHECK(d["holder"]["label"].is_string());
    CHECK(d["since"].is_string());
  }
  REQUIRE(st["queue"].size() == 1);  // `three` waits for both cards
  CHECK(st["queue"][0]["reason"].get<std::string>().find("waiting for 2 cards") == 0);
  CHECK(st["queue"][0]["reason"].get<std::string>().find("held by slow / one") != std::string::npos);
  CHECK(st["queue"][0]["wait_seconds"].is_number());
  CHECK(st["queue"][0]["run"] == id);
  REQUIRE(st["active_runs"].size() == 1);
  CHECK(st["active_runs"][0]["steps_running"] == 2);
  CHECK(st["runs_by_result"]["running"] == 1);
  CHECK(st.dump().find("hunter2") == std::string::npos);  // secrets never reach the status

  json run = s.get(api_path::run(id));
  CHECK(run["state"] == "running");
  const auto& step = run["jobs"][0]["steps"][0];
  for (const char* k : {"created", "runnable", "started"}) CHECK(step[k].is_string());
  CHECK(step["finished"].is_null());
  CHECK(step["cards"].size() == 1);
  CHECK(step["attempt"] == 1);
  CHECK(step["log"].get<std::string>() == api_path::step_log(id, "1-1"));
  CHECK(run["jobs"][0]["steps"][2]["wait_reason"].get<std::string>().find("waiting for 2 cards") == 0);
  CHECK(run.dump().find("hunter2") == std::string::npos);

  REQUIRE(s.post(api_path::run_cancel(id), json::object()).status == 202);
  json done = s.wait_run(id);
  CHECK(done["state"] == "cancelled");
  CHECK(done["finished"].is_string());
  CHECK(done["jobs"][0]["steps"][0]["state"] == "cancelled");
  CHECK(done["jobs"][0]["steps"][0]["signal"] == SIGTERM);
  json after = s.get(api_path::kStatus);
  for (const auto& d : after["devices"]) CHECK(d["state"] == "free");
  CHECK(after["queue"].empty());
  CHECK(after["runs_by_result"]["cancelled"] == 1);
  CHECK_FALSE(pid_running(std::stoi(read_file(s.dir.path() / "two.escapee"))));
  json runs = s.get(api_path::kRuns);
  CHECK(runs["runs"][0]["id"] == id);
  CHECK(runs["runs"][0]["request"]["env"] == json::array({"SECRET"}));
}

TEST_CASE("serve: mutations need the token, bad requests get 400/404/413 and the daemon keeps serving", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  s.start();
  CHECK(s.post(api_path::kRuns, {{"jobs", {"quick"}}}, "").status == 401);
  CHECK(s.post(api_path::kRuns, {{"jobs", {"quick"}}}, std::string(s.token.size(), 'x')).status == 401);
  CHECK(s.post(api_path::kRuns, {{"jobs", {"quick"}}}, s.token + "x").status == 401);
  CHECK(s.get(api_path::kRuns)["runs"].empty());  // nothing happened

  auto malformed = pto::api_request("POST", s.url(api_path::kRuns), s.token, "{not json");
  CHECK(malformed.status == 400);
  auto unknown = s.post(api_path::kRuns, {{"jobs", {"nope"}}});
  CHECK(unknown.status == 400);
  CHECK(unknown.body.find("no job named 'nope'") != std::string::npos);
  CHECK(s.post(api_path::kRuns, {{"jobs", "quick"}}).status == 400);
  CHECK(s.post(api_path::kRuns, {{"jbos", {"quick"}}}).status == 400);
  CHECK(s.post(api_path::kRuns, {{"env", {{"BAD NAME", "x"}}}}).status == 400);
  auto big = pto::api_request("POST", s.url(api_path::kRuns), s.token, std::string(2 * 1024 * 1024, ' '));
  CHECK((!big.reached || big.status == 413));

  std::string id = s.submit_run({{"jobs", {"quick"}}});
  s.wait_run(id);
  for (const char* bad : {"/steps/..%2F..%2Fetc%2Fpasswd/log", "/steps/../../etc/passwd/log", "/steps/1-1%2F..%2F..%2Fx/log",
                          "/steps/9-9/log", "/steps/0-0/log"}) {
    auto lr = pto::api_request("GET", s.url(api_path::run(id) + bad));
    INFO(bad);
    CHECK(lr.status == 404);
    CHECK(lr.body.find("root:") == std::string::npos);
  }
  auto log = pto::api_request("GET", s.url(api_path::step_log(id, "1-1") + "?tail=5"));
  CHECK(log.status == 200);
  CHECK(log.body == "fine\n");
  CHECK(pto::api_request("GET", s.url(api_path::run("20990101-000000-abcd"))).status == 404);
  CHECK(pto::api_request("GET", s.url("/nope")).status == 404);
  CHECK(pto::api_request("DELETE", s.url(api_path::kStatus)).status == 405);
  CHECK(s.post(api_path::run_cancel(id), json::object()).status == 409);
  CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).body == "ok\n");
  auto metrics = pto::api_request("GET", s.url(api_path::kMetrics));
  CHECK(metrics.body.find("pto_runner_cards{state=\"free\"} 2") != std::string::npos);
  CHECK(metrics.body.find("pto_runner_steps_total{result=\"succeeded\"} 1") != std::string::npos);
  CHECK(metrics.body.find("pto_runner_wait_seconds_count 1") != std::string::npos);
  CHECK(metrics.body.find("pto_runner_step_duration_seconds_bucket{result=\"succeeded\",le=\"+Inf\"} 1") != std::string::npos);

  // A step that printed nothing has no log file (it is made on the first output); its log reads as empty.
  auto quiet = s.post(api_path::kRuns, {{"jobs", {"quiet"}}});
  REQUIRE(quiet.status == 201);
  std::string quiet_id = json::parse(quiet.body)["id"];
  CHECK(s.wait_run(quiet_id)["state"] == "succeeded");
  auto empty = pto::api_request("GET", s.url(api_path::step_log(quiet_id, "1-1")));
  CHECK(empty.status == 200);
  CHECK(empty.body.empty());
}

TEST_CASE("serve: 200 concurrent pollers are all answered, a byte-a-second client blocks nobody", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  // 200 pollers of one user (the test's) at once: more than one client's default share, whose cap has its own
  // tests (api_access_test.cpp); this one is about the server answering them all.
  s.dir.write("runner.yml", "max-connections-per-client: 256\n");
  s.start();
  REQUIRE(s.post(api_path::kRuns, {{"jobs", {"slow"}}}).status == 201);
  // A slow client: connects and sends its headers one byte at a time.
  int slow = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  REQUIRE(connect(slow, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const char* req = "GET /api/v1/status HTTP/1.1\r\nHost: x\r\n\r\n";
    for (const char* c = req; *c && !stop; ++c) {
      if (send(slow, c, 1, MSG_NOSIGNAL) < 0) break;
      for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 200; ++c)
    clients.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        auto r = pto::api_request("GET", s.url(api_path::kStatus));
        (r.reached && r.status == 200 && r.body.find("\"devices\"") != std::string::npos ? ok : failed)++;
      }
    });
  for (auto& t : clients) t.join();
  CHECK(ok == 600);
  CHECK(failed == 0);
  // The slow client is still mid-headers: it was not what the others waited on.
  char probe;
  CHECK(recv(slow, &probe, 1, MSG_DONTWAIT) < 0);
  stop = true;
  trickle.join();
  close(slow);
}

TEST_CASE("submit --wait exits with the run's result, 3 when the server is down", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  s.start();
  auto token_file = (s.dir.path() / "state/token").string();
  CommandResult good = run_cli({"submit", "--server", s.url(), "--token-file", token_file, "--job", "quick", "--wait",
                                "--poll-interval", "0.1"});
  INFO(good.out << good.err);
  CHECK(good.exit_code == 0);
  CHECK(good.out.find("<== quick / ok: succeeded, exit 0") != std::string::npos);

  CommandResult bad = run_cli({"submit", "--server", s.url(), "--job", "broken", "--wait", "--poll-interval", "0.1"},
                              {{"PTO_RUNNER_TOKEN", s.token}});
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.find("<== broken / bad: failed, exit 4") != std::string::npos);
  CHECK(bad.out.find("going wrong\nreally\n") != std::string::npos);  // the failed step's log tail

  CommandResult refused = run_cli({"submit", "--server", s.url(), "--job", "quick"}, {{"PTO_RUNNER_TOKEN", "wrong-token-value"}});
  CHECK(refused.exit_code == 2);
  CHECK((refused.out + refused.err).find("the server refused the run (HTTP 401)") != std::string::npos);

  s.stop();
  CommandResult down = run_cli({"submit", "--server", s.url(), "--token-file", token_file, "--wait"});
  CHECK(down.exit_code == 3);
  CHECK(down.err.find("cannot reach") != std::string::npos);
  CHECK(run_cli({"status", "--server", s.url()}).exit_code == 3);
}

TEST_CASE("submit: SIGTERM cancels the remote run and frees its cards", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  s.start();
  Spawned sub = spawn_cli({"submit", "--server", s.url(), "--job", "slow", "--wait", "--poll-interval", "0.1"},
                          {{"PTO_RUNNER_TOKEN", s.token}});
  REQUIRE(wait_until([&] { return fs::exists(s.dir.path() / "two.escapee") && fs::exists(s.dir.path() / "one.pid"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(sub.pid, SIGTERM);
  CommandResult r = wait_cli(sub);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 143);
  json st = s.get(api_path::kStatus);
  CHECK(st["active_runs"].empty());
  for (const auto& d : st["devices"]) CHECK(d["state"] == "free");
  for (const char* f : {"one.pid", "two.escapee"}) CHECK_FALSE(pid_running(std::stoi(read_file(s.dir.path() / f))));
  CHECK(s.get(api_path::kRuns)["runs"][0]["state"] == "cancelled");
  // status for a person says the same
  CommandResult text = run_cli({"status", "--server", s.url()});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("cancelled 1") != std::string::npos);
}

TEST_CASE("serve: after SIGKILL and restart, history is intact and the old run is interrupted", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  // Its steps the daemon's own children (with supervisors they run on and the run is taken over:
  // supervise_test.cpp).
  s.dir.write("runner.yml", "supervise: false\n");
  s.start();
  auto done = s.post(api_path::kRuns, {{"jobs", {"quick"}}});
  std::string first = json::parse(done.body)["id"];
  s.wait_run(first);
  auto r = s.post(api_path::kRuns, {{"jobs", {"slow"}}});
  std::string id = json::parse(r.body)["id"];
  REQUIRE(wait_until([&] { return fs::exists(s.dir.path() / "two.escapee") && fs::exists(s.dir.path() / "one.pid"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int one = std::stoi(read_file(s.dir.path() / "one.pid"));
  int escapee = std::stoi(read_file(s.dir.path() / "two.escapee"));
  s.stop(SIGKILL);
  CHECK(pid_running(one));  // the old daemon's steps outlived it...
  s.start();                // ...until the new one recovers
  CHECK_FALSE(pid_running(one));
  CHECK_FALSE(pid_running(escapee));
  json old = s.get(api_path::run(id));
  CHECK(old["state"] == "interrupted");
  CHECK(old["jobs"][0]["steps"][0]["state"] == "interrupted");
  CHECK(old["jobs"][0]["steps"][2]["state"] == "cancelled");
  json hist = s.get(api_path::run(first));
  CHECK(hist["state"] == "succeeded");
  auto log = pto::api_request("GET", s.url(api_path::step_log(first, "1-1")));
  CHECK(log.body == "fine\n");
  json st = s.get(api_path::kStatus);
  for (const auto& d : st["devices"]) CHECK(d["state"] == "free");
  std::string holder;
  CHECK_FALSE(pto::CardLock::held_elsewhere(s.locks(), 0, holder));
  CHECK(st["runs_by_result"]["interrupted"] == 1);
  // And it works: a new run on the freed cards.
  auto again = s.post(api_path::kRuns, {{"jobs", {"quick"}}});
  REQUIRE(again.status == 201);
  CHECK(s.wait_run(json::parse(again.body)["id"])["state"] == "succeeded");
}

TEST_CASE("serve: cards are drained and returned to service over the API, with the token", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  s.start();
  CHECK(s.post(api_path::device(1, "drain"), {{"reason", "card 1 fell off the bus"}}, "").status == 401);
  CHECK(s.post(api_path::device(9, "drain"), json::object()).status == 404);
  REQUIRE(s.post(api_path::device(1, "drain"), {{"reason", "card 1 fell off the bus"}}).status == 200);
  json st = s.get(api_path::kStatus);
  CHECK(st["devices"][1]["state"] == "drained");
  CHECK(st["devices"][1]["drain_reason"] == "card 1 fell off the bus");
  auto r = s.post(api_path::kRuns, {{"jobs", {"quick"}}});
  json run = s.wait_run(json::parse(r.body)["id"]);
  CHECK(run["jobs"][0]["steps"][0]["cards"] == json::array({0}));
  CommandResult cli = run_cli({"devices", "--server", s.url(), "--undrain", "1"}, {{"PTO_RUNNER_TOKEN", s.token}});
  CHECK(cli.exit_code == 0);
  CHECK(cli.out.find("1    -      free") != std::string::npos);
  CHECK(s.get(api_path::kStatus)["devices"][1]["state"] == "free");
}

TEST_CASE("serve: a broken job file refuses runs with its findings, and a fix needs no restart", "[daemon]") {
  Served s;
  sleepy_project(s.dir, s.dir.str());
  s.dir.write("jobs/quick.yml", "name: quick\nsteps:\n  - {name: ok, devices: 1, run: 'echo fine', timeout-minute: 1}\n");
  s.start();
  auto r = s.post(api_path::kRuns, {{"jobs", {"quick"}}});
  CHECK(r.status == 400);
  auto body = json::parse(r.body);
  REQUIRE(body["findings"].size() == 1);
  CHECK(body["findings"][0]["file"] == "jobs/quick.yml");
  CHECK(body["findings"][0]["line"] == 3);
  CHECK(body["findings"][0]["rule"] == "unknown-key");
  s.dir.write("jobs/quick.yml", "name: quick\nsteps:\n  - {name: ok, devices: 1, run: 'echo fine', timeout-minutes: 1}\n");
  auto fixed = s.post(api_path::kRuns, {{"jobs", {"quick"}}});
  REQUIRE(fixed.status == 201);
  CHECK(s.wait_run(json::parse(fixed.body)["id"])["state"] == "succeeded");
  // Bad host settings do stop it from starting.
  Served bad;
  sleepy_project(bad.dir, bad.dir.str());
  bad.dir.write("runner.yml", "listen: nowhere\n");
  CommandResult r2 = run_cli({"serve", "--root", bad.dir.str(), "--state-dir", bad.state(), "--lock-dir", bad.locks()});
  CHECK(r2.exit_code == 2);
  CHECK(r2.err.find("runner.yml:1:9: error: 'listen' must be ADDRESS:PORT") != std::string::npos);
}

TEST_CASE("submit inside Actions: no byte of step output is a workflow command, live or in log tails", "[daemon]") {
  Served s;
  s.dir.write("hostile.sh", kHostileStepScript);
  write_project(s.dir, {{"h.yml", "name: h\nsteps:\n  - {name: 'talk ##[error]n', run: 'sh hostile.sh; sleep 0.3; sh hostile.sh'}\n"
                                  "  - {name: fail, run: 'echo \"### from the step\" >> \"$GITHUB_STEP_SUMMARY\"; sh hostile.sh; exit 3'}\n"}});
  s.start();
  const std::string summary = (s.dir.path() / "summary.md").string();
  auto r = run_cli({"submit", "--server", s.url(), "--wait", "--follow", "--poll-interval", "0.1"},
                   {{"GITHUB_ACTIONS", "true"}, {"PTO_RUNNER_TOKEN", s.token}, {"GITHUB_STEP_SUMMARY", summary},
                    {"GITHUB_REPOSITORY", "hw-native-sys/pypto"}, {"GITHUB_RUN_ID", "42"},
                    {"GITHUB_SERVER_URL", "https://github.com"}});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  // The output is all there, live and prefixed, and in the failed step's log tail.
  CHECK(r.out.find("[h / talk ##[error]n] ::error::x\n") != std::string::npos);
  CHECK(r.out.find("[h / fail] no newline ::error::z\n") != std::string::npos);
  CHECK(r.out.find("\n  ::endgroup::\n") != std::string::npos);
  // GitHub's parser sees only the runner's own commands.
  std::vector<std::string> own;
  for (const auto& c : accepted_commands(r.out)) {
    if (c.name == "stop-commands" || (c.name.size() == 32 && c.data.empty())) continue;
    own.push_back(c.name + ":" + c.data);
  }
  CHECK(own == std::vector<std::string>{"group:h / fail (failed, exit 3), last lines of its log", "endgroup:",
                                        "error:failed: code (exit 3)"});
  CHECK(read_file(summary).find("| h | fail | failed |") != std::string::npos);
  CHECK(read_file(summary).find("\n### from the step\n") != std::string::npos);  // the step's own summary follows
  // The run links back to the Actions run that submitted it.
  json runs = s.get(api_path::kRuns);
  CHECK(runs["runs"][0]["request"]["github"]["run_url"] == "https://github.com/hw-native-sys/pypto/actions/runs/42");
}

TEST_CASE("serve: a step without an estimate is planned with the p90 of its last runs, expected-minutes still wins", "[daemon]") {
  Served s;
  const std::string counter = (s.dir.path() / "count").string();
  write_project(s.dir, {{"h.yml", "name: h\nsteps:\n"
                                  "  - {name: learn, run: 'n=$(cat " + counter + " 2>/dev/null || echo 0); echo $((n+1)) > " +
                                      counter + "; sleep 0.$((n+1))'}\n"
                                  "  - {name: written, expected-minutes: 7, run: 'true'}\n"}});
  s.dir.write("runner.yml", "state-dir: state\n");
  s.start();
  for (int i = 0; i < 5; ++i) {
    auto r = s.post(api_path::kRuns, json::object());
    REQUIRE(r.status == 201);
    CHECK(s.wait_run(json::parse(r.body)["id"])["state"] == "succeeded");
  }
  CommandResult plan = run_cli({"plan", "--root", s.dir.str(), "--format", "json"});
  REQUIRE(plan.exit_code == 0);
  json j = json::parse(plan.out);
  const json& learn = j["jobs"][0]["steps"][0];
  CHECK(learn["expected_source"] == "history");
  CHECK(learn["expected_samples"] == 5);
  double minutes = learn["expected_minutes"];
  CHECK(minutes * 60 > 0.48);  // the 5th of 0.1 .. 0.5 s (nearest-rank p90), plus the shell's start
  CHECK(minutes * 60 < 1.0);
  CHECK(j["jobs"][0]["steps"][1]["expected_source"] == "expected-minutes");
  CHECK(j["jobs"][0]["steps"][1]["expected_minutes"] == 7);
  CommandResult text = run_cli({"plan", "--root", s.dir.str()});
  CHECK(text.out.find("(learned: p90 of 5 runs)") != std::string::npos);
  // The daemon uses it too, and the run's JSON says where it came from.
  auto r = s.post(api_path::kRuns, json::object());
  json run = s.wait_run(json::parse(r.body)["id"]);
  CHECK(run["jobs"][0]["steps"][0]["estimate"]["source"] == "history");
}

TEST_CASE("status: a running step's card and a waiting step's queue entry carry the step's estimate and its source", "[daemon]") {
  Served s;
  s.devices = "1";
  const std::string go = (s.dir.path() / "go").string();
  write_project(s.dir, {{"e.yml", "name: e\nparallel: true\nsteps:\n"
                                  "  - {name: a, devices: 1, expected-minutes: 3, run: 'while [ ! -e " + go + " ]; do sleep 0.05; done'}\n"
                                  "  - {name: b, devices: 1, expected-minutes: 4, run: 'true'}\n"}});
  s.start();
  auto r = s.post(api_path::kRuns, json::object());
  REQUIRE(r.status == 201);
  json st;
  bool both = wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["devices"][0]["holder"].is_object() && st["queue"].size() == 1;
  }, 10);
  INFO(st.dump(1));
  REQUIRE(both);
  INFO(st.dump(1));
  const json& holder = st["devices"][0]["holder"]["estimate"];
  const json& waiting = st["queue"][0]["estimate"];
  CHECK(holder["source"] == "expected-minutes");
  CHECK(waiting["source"] == "expected-minutes");
  // One runs, the other waits: between them, both estimates.
  CHECK(holder["minutes"].get<double>() + waiting["minutes"].get<double>() == 7);
  // The active run lists its running step with a log link (the page shows it without reading the run).
  const json& running = st["active_runs"][0]["running_steps"];
  REQUIRE(running.size() == 1);
  CHECK(running[0]["step"] == "e / " + st["devices"][0]["holder"]["label"].get<std::string>().substr(4));
  CHECK(running[0]["log_url"] == st["devices"][0]["holder"]["log_url"]);
  std::ofstream(go) << "1";
  CHECK(s.wait_run(json::parse(r.body)["id"])["state"] == "succeeded");
}

TEST_CASE("log API paging by offset, and submit found through PTO_RUNNER_SERVER with a heartbeat for a long step", "[daemon]") {
  Served s;
  write_project(s.dir, {{"l.yml", "name: l\nsteps:\n  - {name: long, run: 'printf \"0123456789\"; sleep 2.2; printf \"abcdef\"'}\n"}});
  s.start();
  // No --server: $PTO_RUNNER_SERVER; no --follow: a "still running" line per heartbeat interval.
  auto sub = run_cli({"submit", "--wait", "--heartbeat", "1", "--poll-interval", "0.1"},
                     {{"PTO_RUNNER_SERVER", s.url()}, {"PTO_RUNNER_TOKEN", s.token}});
  INFO(sub.out << sub.err);
  CHECK(sub.exit_code == 0);
  CHECK(sub.out.find("l / long: still running after") != std::string::npos);
  std::string id = s.get(api_path::kRuns)["runs"][0]["id"];
  const std::string log = s.url(api_path::step_log(id, "1-1"));
  // Paging: each answer says where the next read starts.
  auto first = pto::api_request("GET", log + "?offset=0&bytes=4");
  REQUIRE(first.status == 200);
  CHECK(first.body == "0123");
  CHECK(first.header("x-log-start") == "0");
  CHECK(first.header("x-log-end") == "4");
  CHECK(first.header("x-log-size") == "16");
  auto rest = pto::api_request("GET", log + "?offset=" + first.header("x-log-end"));
  CHECK(rest.body == "456789abcdef");
  CHECK(rest.header("x-log-end") == "16");
  auto past = pto::api_request("GET", log + "?offset=16");
  CHECK(past.status == 200);
  CHECK(past.body.empty());
  CHECK(pto::api_request("GET", log + "?offset=-1").status == 400);
  CHECK(pto::api_request("GET", log + "?offset=0&tail=3").status == 400);
}
