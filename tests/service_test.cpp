// Operating the daemon as a service, end to end against a real `pto-runner serve`: valid Prometheus text
// (checked by promtool), SIGTERM's drain and a second SIGTERM's cancel, SIGHUP's reload, the status page in
// headless Chromium, packaging (cmake --install, cpack DEB), retention of a long history, the daemon's log
// format, and the refusals that keep one owner per state dir.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "served_daemon.h"
#include "store/journal.h"
#include "util/api_paths.h"

using namespace pto::test;
namespace fs = std::filesystem;

namespace {

// `promtool check metrics` on a scrape: "" when valid, else what promtool said.
std::string promtool_problems(const std::string& scrape, const TempDir& dir) {
  const fs::path file = dir.path() / "scrape.txt";
  std::ofstream(file) << scrape;
  std::string out;
  int rc = sh("promtool check metrics < " + file.string() + " 2>&1", &out);
  return rc == 0 ? "" : out.empty() ? "promtool exit " + std::to_string(rc) : out;
}

std::string metrics_of(const Served& s) {
  auto r = pto::api_request("GET", s.url(api_path::kMetrics));
  REQUIRE(r.status == 200);
  return r.body;
}

}  // namespace

TEST_CASE("metrics: /metrics passes promtool check metrics during and after a run, with every series", "[service]") {
  if (!have("promtool")) {
    WARN("SKIPPED: promtool is not installed (Debian package prometheus; scripts/install-deps.sh installs it)");
    return;
  }
  Served s;
  write_project(s.dir, {{"work.yml", "name: work\nsteps:\n"
                                     "  - {name: 'a step with a \"quoted\" name', devices: 1, run: 'sleep 1'}\n"
                                     "  - {name: fails, devices: 1, run: 'exit 3', continue-on-error: true}\n"}});
  s.start();
  std::string id = s.submit_run();
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices_by_state"].value("busy", 0) == 1; }, 10));
  std::string during = metrics_of(s);
  CHECK(promtool_problems(during, s.dir) == "");
  CHECK(during.find("pto_runner_card_state{card=\"0\",type=\"\",state=\"busy\"} 1") != std::string::npos);
  CHECK(s.wait_run(id)["state"] == "succeeded");
  REQUIRE(wait_until([&] { return metrics_of(s).find("pto_runner_steps_total{result=\"failed\"} 1") != std::string::npos; }, 5));
  std::string after = metrics_of(s);
  CHECK(promtool_problems(after, s.dir) == "");
  for (const char* series : {"pto_runner_build_info{version=\"", "pto_runner_uptime_seconds ", "pto_runner_draining 0",
                             "pto_runner_cards{state=\"free\"} 2", "pto_runner_card_busy_seconds_total{card=\"0\"} ",
                             "pto_runner_queue_length 0", "pto_runner_queue_oldest_wait_seconds 0",
                             "pto_runner_leases{state=\"granted\"} 0", "pto_runner_wait_seconds_count 2",
                             "pto_runner_step_duration_seconds_count{result=\"succeeded\"} 1",
                             "pto_runner_step_duration_seconds_bucket{result=\"failed\",le=\"+Inf\"} 1",
                             "pto_runner_steps_total{result=\"succeeded\"} 1", "pto_runner_runs_total{result=\"succeeded\"} 1"})
    CHECK(after.find(series) != std::string::npos);
  // The commit is in the build info (CMake asked git at configure time).
  CHECK(after.find(",commit=\"") != std::string::npos);
  // A card held by a sleeping step for a second has at least that much busy time.
  auto at = after.find("pto_runner_card_busy_seconds_total{card=\"0\"} ");
  double busy0 = std::stod(after.substr(at + std::string("pto_runner_card_busy_seconds_total{card=\"0\"} ").size()));
  auto at1 = after.find("pto_runner_card_busy_seconds_total{card=\"1\"} ");
  double busy1 = std::stod(after.substr(at1 + std::string("pto_runner_card_busy_seconds_total{card=\"1\"} ").size()));
  CHECK(busy0 + busy1 >= 1.0);
}

TEST_CASE("signals: a drain past shutdown-timeout-minutes cancels the rest (143), and a draining run's step may still lease", "[service]") {
  Served s;
  TempDir bin;
  fs::create_symlink(PTO_RUNNER_BIN, bin.path() / "task-submit");
  s.env = {{"PATH", bin.str() + ":" + std::getenv("PATH")}};
  const fs::path leased = s.dir.path() / "leased", stuck = s.dir.path() / "stuck.pid";
  s.dir.write("runner.yml", "shutdown-timeout-minutes: 0.05\n");  // 3 s
  write_project(s.dir, {{"slow.yml", "name: slow\nsteps:\n"
                                     "  - run: |\n      while [ ! -e " + s.dir.str() + "/draining ]; do sleep 0.05; done\n"
                                     "      task-submit --device-num 1 --run 'echo $TASK_DEVICE > " + leased.string() + "'\n"
                                     "      echo $$ > " + stuck.string() + "; sleep 1000\n"}});
  s.start();
  std::string id = s.submit_run();
  ::kill(s.proc.pid, SIGTERM);
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["draining"] == true; }, 5));
  std::ofstream((s.dir.path() / "draining").string()) << "";
  // An accepted run's step still borrows a card through task-submit while the daemon drains.
  REQUIRE(wait_for_content(leased, 10));
  REQUIRE(wait_for_content(stuck, 10));
  int step = std::stoi(read_file(stuck));
  // It never ends by itself: at shutdown-timeout-minutes the daemon cancels it and exits 143.
  CommandResult exit = wait_cli(s.proc);
  s.proc.pid = -1;
  INFO(exit.err);
  CHECK(exit.exit_code == 143);
  CHECK(wait_until([&] { return !pid_running(step); }, 10));
}

TEST_CASE("signals: SIGTERM drains: new runs get 503, the accepted run's steps all run, it succeeds, exit 0", "[service]") {
  Served s;
  const fs::path gate = s.dir.path() / "gate", second = s.dir.path() / "second";
  write_project(s.dir, {{"two.yml", "name: two\nsteps:\n"
                                    "  - {name: first, devices: 1, run: 'while [ ! -e " + gate.string() + " ]; do sleep 0.05; done'}\n"
                                    "  - {name: second, devices: 1, run: 'touch " + second.string() + "'}\n"}});
  s.start();
  std::string id = s.submit_run();
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices_by_state"].value("busy", 0) == 1; }, 10));
  ::kill(s.proc.pid, SIGTERM);
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["draining"] == true; }, 5));
  auto refused = s.post(api_path::kRuns, json::object());
  CHECK(refused.status == 503);
  CHECK(refused.body.find("draining (SIGTERM)") != std::string::npos);
  auto lease = s.post(api_path::kLeases, {{"devices", 1}});  // the admin's own lease: not part of an accepted run
  CHECK(lease.status == 503);
  std::ofstream(gate.string()) << "go";
  json done = s.wait_run(id);  // the client still reads its run to the end
  CHECK(done["state"] == "succeeded");
  CHECK(fs::exists(second));
  CommandResult exit = wait_cli(s.proc);
  s.proc.pid = -1;
  CHECK(exit.exit_code == 0);
  CHECK(exit.err.find("draining") != std::string::npos);
}

TEST_CASE("signals: a second SIGTERM cancels what the drain waits for: the run is cancelled, exit 143", "[service]") {
  Served s;
  write_project(s.dir, {{"slow.yml", "name: slow\nsteps:\n  - {name: forever, devices: 1, run: 'sleep 1000'}\n"}});
  s.start();
  std::string id = s.submit_run();
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices_by_state"].value("busy", 0) == 1; }, 10));
  ::kill(s.proc.pid, SIGTERM);
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["draining"] == true; }, 5));
  ::kill(s.proc.pid, SIGTERM);
  CommandResult exit = wait_cli(s.proc);
  s.proc.pid = -1;
  CHECK(exit.exit_code == 143);
  // The journal has it cancelled (read back by a second daemon on the same state dir).
  Served again;
  again.state_dir = s.state();
  write_project(again.dir, {{"slow.yml", "name: slow\nsteps:\n  - {name: forever, devices: 1, run: 'sleep 1000'}\n"}});
  again.start();
  CHECK(again.get(api_path::run(id))["state"] == "cancelled");
}

TEST_CASE("signals: SIGHUP reloads runner.yml: an added card is used, a broken file keeps the old settings", "[service]") {
  Served s;
  s.devices = "";  // the cards come from runner.yml
  s.dir.write("runner.yml", "devices:\n  ids: [0]\n");
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  write_project(s.dir, {{"pair.yml", "name: pair\nparallel: true\nsteps:\n"
                                     "  - {name: a, devices: 1, run: 'echo $TASK_DEVICE > " + marks.string() + "/a; sleep 1'}\n"
                                     "  - {name: b, devices: 1, run: 'echo $TASK_DEVICE > " + marks.string() + "/b; sleep 1'}\n"}});
  s.start();
  CHECK(s.get(api_path::kStatus)["devices"].size() == 1);
  s.dir.write("runner.yml", "devices:\n  ids: [0, 1]\n");
  ::kill(s.proc.pid, SIGHUP);
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"].size() == 2; }, 5));
  CHECK(read_file(s.proc.err).find("reload: card 1 added") != std::string::npos);
  auto r = s.post(api_path::kRuns, json::object());
  REQUIRE(r.status == 201);
  CHECK(s.wait_run(json::parse(r.body)["id"])["state"] == "succeeded");
  std::set<std::string> used = {read_file(marks / "a"), read_file(marks / "b")};
  CHECK(used == std::set<std::string>{"0\n", "1\n"});  // both steps at once, one on the added card

  s.dir.write("runner.yml", "devices:\n  ids: [0, 1, 2]\n  bogus: 1\n");
  ::kill(s.proc.pid, SIGHUP);
  REQUIRE(wait_until([&] { return read_file(s.proc.err).find("keeping the old ones") != std::string::npos; }, 5));
  CHECK(read_file(s.proc.err).find("runner.yml:3:3") != std::string::npos);  // where the mistake is
  CHECK(s.get(api_path::kStatus)["devices"].size() == 2);
  CHECK(pid_running(s.proc.pid));  // SIGHUP no longer ends the daemon
}

TEST_CASE("status page: headless Chromium shows the cards, a waiting step's reason and a working log link", "[service]") {
  if (!have("chromium")) {
    WARN("SKIPPED: chromium is not installed (Debian package chromium; scripts/install-deps.sh installs it)");
    return;
  }
  Served s;
  s.devices = "2";
  write_project(s.dir, {{"busy.yml", "name: busy\nparallel: true\nsteps:\n"
                                     "  - {name: holder, devices: 1, run: 'echo holding the card; sleep 1000'}\n"
                                     "  - {name: other, devices: 1, run: 'sleep 1000'}\n"
                                     "  - {name: pair, devices: 2, run: 'true'}\n"},
                        {"broken.yml", "name: broken\nsteps:\n  - {name: fails, run: 'echo bad; exit 3'}\n"}});
  s.start();
  // A finished run with a failed step: the recent runs' table links that step's log.
  auto f = s.post(api_path::kRuns, {{"jobs", {"broken"}}});
  REQUIRE(f.status == 201);
  std::string failed = json::parse(f.body)["id"];
  REQUIRE(s.wait_run(failed)["state"] == "failed");
  std::string id = s.submit_run({{"jobs", {"busy"}}});
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["queue"].size() == 1; }, 10));
  REQUIRE(wait_until([&] {
    return pto::api_request("GET", s.url(api_path::step_log(id, "1-1"))).body.find("holding the card") != std::string::npos;
  }, 10));
  std::string dom;
  REQUIRE(s.page_dom(dom));
  // Rendered by the page's script from /api/v1/status (the static HTML has empty tables).
  CHECK(dom.find("class=\"state busy\"") != std::string::npos);
  CHECK(dom.find(">busy / holder<") != std::string::npos);
  CHECK(dom.find("waiting for 2 cards") != std::string::npos);
  const std::string log = api_path::step_log(id, "1-1");
  CHECK(dom.find("href=\"" + log + "\"") != std::string::npos);
  // The link the page shows serves the step's log.
  CHECK(pto::api_request("GET", s.url(log)).body.find("holding the card") != std::string::npos);
  // Runs link the logs worth opening: the active run's running steps, the finished run's failed one.
  CHECK(dom.find("href=\"" + api_path::step_log(id, "1-2") + "\">busy / other<") != std::string::npos);
  const std::string failed_log = api_path::step_log(failed, "1-1");
  CHECK(dom.find("href=\"" + failed_log + "\">broken / fails<") != std::string::npos);
  CHECK(pto::api_request("GET", s.url(failed_log)).body.find("bad") != std::string::npos);
  // Nothing from outside the daemon.
  std::string html = pto::api_request("GET", s.url("/")).body;
  CHECK(html.find("src=\"http") == std::string::npos);
  CHECK(html.find("href=\"http") == std::string::npos);
}

TEST_CASE("status: a 1-card wait says all N usable cards are busy, and queue entries carry run, step and links", "[service]") {
  Served s;
  s.devices = "2";
  write_project(s.dir, {{"three.yml", "name: three\nparallel: true\nsteps:\n"
                                      "  - {name: a, devices: 1, run: 'sleep 1000 # a'}\n"
                                      "  - {name: b, devices: 1, run: 'sleep 1000 # b'}\n"
                                      "  - {name: c, devices: 1, run: 'true'}\n"}});
  s.start();
  auto r = s.post(api_path::kRuns, json::object());
  std::string id = json::parse(r.body)["id"];
  json st;
  REQUIRE(wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["queue"].size() == 1 && st["devices_by_state"].value("busy", 0) == 2;
  }, 10));
  const json& q = st["queue"][0];
  CHECK(q["reason"] == "waiting for 1 card: all 2 usable cards busy");
  CHECK(q["position"] == 1);
  CHECK(q["run"] == id);
  CHECK(q["step_id"] == "1-3");
  CHECK(q["run_url"] == api_path::run(id));
  CHECK(q["log_url"] == api_path::step_log(id, "1-3"));
  CHECK(st["devices"][0]["holder"]["log_url"].get<std::string>().rfind(api_path::run(id) + "/steps/1-", 0) == 0);
  CHECK(st["devices"][0]["holder"]["other_program"] == false);
  // Durations are rounded to milliseconds.
  double w = q["wait_seconds"];
  CHECK(std::abs(w * 1000 - std::round(w * 1000)) < 1e-6);
  // Draining a busy card keeps what still runs on it in view.
  REQUIRE(s.post(api_path::device(1, "drain"), {{"reason", "ECC errors"}}).status == 200);
  json card = s.get(api_path::kStatus)["devices"][1];
  CHECK(card["state"] == "drained");
  CHECK(card["drain_reason"] == "ECC errors");
  CHECK(card["holder"]["run"] == id);
  CHECK(card["holder"]["label"].get<std::string>().rfind("three / ", 0) == 0);
}

TEST_CASE("daemon: a step only drained cards could serve waits for them and runs once one is undrained", "[service]") {
  Served s;
  s.devices = "1";
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - {name: needs-card, devices: 1, run: 'true'}\n"}});
  s.start();
  REQUIRE(s.post(api_path::device(0, "drain"), {{"reason", "fell off the bus"}}).status == 200);
  std::string id = s.submit_run();
  json st;
  // Its reason is the scheduler's once its pass ran (a status read between the request and that pass shows
  // the generic one): it must come to say why within the wait.
  const bool said = wait_until([&] {
    st = s.get(api_path::kStatus);
    return st["queue"].size() == 1 && st["queue"][0]["reason"].get<std::string>().find("waiting for a drained card to return") != std::string::npos;
  }, 10);
  INFO(st.dump(2));
  CHECK(said);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(s.get(api_path::run(id))["state"] == "running");  // not failed at once, as `run` would
  REQUIRE(s.post(api_path::device(0, "undrain"), json::object()).status == 200);
  CHECK(s.wait_run(id)["state"] == "succeeded");
}

TEST_CASE("devices --drain without --server refuses while a daemon holds the state dir", "[service]") {
  Served s;
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - run: 'true'\n"}});
  s.start();
  CommandResult r = run_cli({"devices", "--root", s.dir.str(), "--state-dir", s.state(), "--lock-dir", s.locks(),
                             "--devices", "2", "--drain", "1"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--server") != std::string::npos);
  CHECK(r.err.find("pid " + std::to_string(s.proc.pid)) != std::string::npos);
  CHECK(s.get(api_path::kStatus)["devices"][1]["state"] == "free");  // nothing changed behind the daemon's back
}

TEST_CASE("devices: with no daemon and no configuration --drain acts on nothing (exit 2, saying where it looked), and "
          "runner.yml's daemon running it drains that daemon's card", "[service]") {
  TempDir bare;  // no runner.yml, no --server, no $PTO_RUNNER_SERVER
  if (fs::exists("/etc/pto-runner/runner.yml")) {
    WARN("SKIPPED in part: this host has /etc/pto-runner/runner.yml, which the command rightly reads");
  } else {
    CommandResult none = run_cli({"devices", "--root", bare.str(), "--drain", "3"});
    CHECK(none.exit_code == 2);
    CHECK(none.err.find("no runner.yml in " + bare.str()) != std::string::npos);
    CHECK(none.err.find("/etc/pto-runner/runner.yml") != std::string::npos);
    CHECK_FALSE(fs::exists(bare.path() / ".pto-runner"));  // no made-up pool's devices.json written
  }
  Served s;
  s.devices = "4";
  s.listen = "127.0.0.1:" + std::to_string(free_tcp_port());
  s.dir.write("runner.yml", "listen: " + s.listen + "\nstate-dir: " + s.state() + "\n");
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - run: 'true'\n"}});
  s.start();
  // As on-call types it on the host: the daemon and its token found through runner.yml.
  CommandResult drained = run_cli({"devices", "--root", s.dir.str(), "--drain", "3", "--reason", "ECC errors"});
  INFO(drained.out << drained.err);
  CHECK(drained.exit_code == 0);
  const json card = s.get(api_path::kStatus)["devices"][3];
  CHECK(card["state"] == "drained");
  CHECK(card["drain_reason"] == "ECC errors");
  CHECK(drained.out.find("3    -      drained   ECC errors") != std::string::npos);
}

TEST_CASE("serve: --log-format json writes one JSON object per line with UTC times, --version names the commit", "[service]") {
  Served s;
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - run: 'echo \"quoted\"'\n"}});
  s.start({"--log-format", "json", "--log-level", "debug"});
  auto r = s.post(api_path::kRuns, json::object());
  s.wait_run(json::parse(r.body)["id"]);
  s.stop();
  std::istringstream lines(read_file(s.proc.err));
  int objects = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // the CLI's own plain messages
    json j = json::parse(line, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    std::string t = j["time"];
    CHECK(t.size() == 24);
    CHECK(t.back() == 'Z');
    CHECK(j["level"].is_string());
    CHECK(j["msg"].is_string());
    ++objects;
  }
  CHECK(objects >= 2);
  CommandResult bad = run_cli({"serve", "--root", s.dir.str(), "--log-format", "xml"});
  CHECK(bad.exit_code == 2);
  CommandResult v = run_cli({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("pto-runner " PTO_RUNNER_VERSION " (git ") == 0);
}

TEST_CASE("retention: 10,000 finished runs and max-runs 100: the journal and the state dir keep the newest 100", "[service]") {
  TempDir dir;
  const fs::path state = dir.path() / "state";
  fs::create_directories(state / "runs");
  {
    std::string error;
    auto journal = pto::Journal::open((state / "journal.sqlite").string(), error);
    REQUIRE(journal);
    for (int i = 0; i < 10000; ++i) {
      char id[32];
      std::snprintf(id, sizeof(id), "20260101-%06d-%04x", i / 10, i % 0x10000);
      std::string created = "2026-01-01T00:00:00.000Z";
      json rec = {{"id", id}, {"state", "succeeded"}, {"created", created}, {"finished", created}, {"result", 0},
                  {"jobs", json::array()}};
      REQUIRE(journal->restore_run(rec));
      if (i % 100 == 0) fs::create_directories(state / "runs" / id);  // some with their directory
    }
  }
  const auto before = fs::file_size(state / "journal.sqlite");
  Served s;
  s.state_dir = state.string();
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - run: 'true'\n"}});
  s.dir.write("runner.yml", "retention:\n  max-runs: 100\n  max-age-days: 0\n");
  s.start();
  json runs = s.get(std::string(api_path::kRuns) + "?limit=1000")["runs"];
  CHECK(runs.size() == 100);
  std::size_t dirs = 0;
  for (const auto& e : fs::directory_iterator(state / "runs")) dirs += e.is_directory();
  REQUIRE(wait_until([&] {
    dirs = 0;
    for (const auto& e : fs::directory_iterator(state / "runs")) dirs += e.is_directory();
    return dirs <= 1;  // of the 100 directories, only the newest runs' (one in a hundred had one) remain
  }, 10));
  s.stop();
  // The directories of pruned runs are on their way out, not orphans: no warning for each of them.
  CHECK(read_file(s.proc.err).find("no run of the journal owns it") == std::string::npos);
  CHECK(fs::file_size(state / "journal.sqlite") < before / 10);
}

TEST_CASE("packaging: cmake --install into a prefix and cpack's .deb hold the binaries, the unit and the config", "[service][packaging][serial]") {
  TempDir dir;
  const fs::path prefix = dir.path() / "prefix";
  std::string out;
  REQUIRE(sh("cmake --install " PTO_RUNNER_BUILD_DIR " --prefix " + prefix.string() + " > " + (dir.path() / "install.log").string() + " 2>&1") == 0);
  for (const char* f : {"bin/pto-runner", "bin/pto-task-submit", "bin/task-submit", "bin/pto-spawner", "lib/systemd/system/pto-runner.service",
                        "lib/systemd/system/pto-runner.socket", "lib/systemd/system/pto-runner-steps.socket", "etc/pto-runner/runner.yml", "share/doc/pto-runner/README.md", "share/pto-runner/definitions/jobs",
                        "share/pto-runner/alerts/pto-runner.rules.yml"})
    CHECK(fs::exists(prefix / f));
  CHECK(fs::is_symlink(prefix / "bin/task-submit"));
  std::string unit = read_file(prefix / "lib/systemd/system/pto-runner.service");
  for (const char* line : {"KillMode=process", "USR2", "Delegate=yes", "StateDirectory=pto-runner", "User=root", "ExecReload=",
                           "SuccessExitStatus=130 143", "Requires=pto-runner.socket pto-runner-steps.socket"})
    CHECK(unit.find(line) != std::string::npos);
  // The sockets systemd holds across restarts are where the installed runner.yml says the daemon listens.
  const std::string yml = read_file(prefix / "etc/pto-runner/runner.yml");
  const std::string api_socket = read_file(prefix / "lib/systemd/system/pto-runner.socket");
  const std::string steps_socket = read_file(prefix / "lib/systemd/system/pto-runner-steps.socket");
  for (const char* a : {"127.0.0.1:8787", "/run/pto-runner/api.sock"}) {
    CHECK(api_socket.find(std::string("ListenStream=") + a) != std::string::npos);
    CHECK(yml.find(a) != std::string::npos);
  }
  CHECK(steps_socket.find("ListenStream=127.0.0.1:8788") != std::string::npos);
  CHECK(steps_socket.find("FileDescriptorName=steps") != std::string::npos);
  CHECK(yml.find("steps-listen: 127.0.0.1:8788") != std::string::npos);
  if (have("systemd-analyze")) {  // systemd's own reading of the three units
    std::string verify;
    const int rc = sh("cd " + (prefix / "lib/systemd/system").string() + " && systemd-analyze verify --man=no ./pto-runner.socket "
                      "./pto-runner-steps.socket 2>&1", &verify);
    INFO(verify);
    CHECK(rc == 0);
  }
  // The unit runs the binary and reads the config where this install put them.
  CHECK(unit.find("ExecStart=" + (prefix / "bin/pto-runner").string() + " serve --root " +
                  (prefix / "share/pto-runner/definitions").string() + " --config " +
                  (prefix / "etc/pto-runner/runner.yml").string()) != std::string::npos);
  // A reinstall keeps an operator's edited config.
  { std::ofstream(prefix / "etc/pto-runner/runner.yml", std::ios::app) << "# edited by the operator\n"; }
  REQUIRE(sh("cmake --install " PTO_RUNNER_BUILD_DIR " --prefix " + prefix.string() + " > /dev/null 2>&1") == 0);
  CHECK(read_file(prefix / "etc/pto-runner/runner.yml").find("# edited by the operator") != std::string::npos);
  // The installed binary runs and checks the installed config against the installed definitions.
  REQUIRE(sh((prefix / "bin/pto-runner").string() + " --version", &out) == 0);
  CHECK(out.find("(git ") != std::string::npos);
  // The installed binary reads the installed config: its 8 cards (state and locks in a scratch dir here).
  std::string cards;
  CHECK(sh((prefix / "bin/pto-runner").string() + " devices --root " + (prefix / "share/pto-runner/definitions").string() +
               " --config " + (prefix / "etc/pto-runner/runner.yml").string() + " --state-dir " + (dir.path() / "st").string() +
               " --lock-dir " + (dir.path() / "locks").string(),
           &cards) == 0);
  CHECK(cards.find("a2a3") != std::string::npos);
  CHECK(std::count(cards.begin(), cards.end(), '\n') >= 8);

  if (!have("dpkg-deb") || !have("cpack")) {
    WARN("SKIPPED: the .deb part needs dpkg-deb and cpack");
    return;
  }
  const fs::path debs = dir.path() / "debs";
  REQUIRE(sh("cd " PTO_RUNNER_BUILD_DIR " && cpack -G DEB -B " + debs.string() + " > " + (dir.path() / "cpack.log").string() + " 2>&1") == 0);
  std::string deb;
  REQUIRE(sh("ls " + debs.string() + "/*.deb", &deb) == 0);
  deb.erase(deb.find('\n'));
  std::string listing, info;
  REQUIRE(sh("dpkg -c " + deb, &listing) == 0);
  for (const char* f : {"./usr/bin/pto-runner", "./usr/bin/pto-task-submit", "./usr/bin/task-submit", "./usr/bin/pto-spawner",
                        "./usr/lib/systemd/system/pto-runner.service", "./etc/pto-runner/runner.yml"})
    CHECK(listing.find(f) != std::string::npos);
  std::string deb_unit;
  REQUIRE(sh("dpkg-deb --fsys-tarfile " + deb + " | tar -xO ./usr/lib/systemd/system/pto-runner.service", &deb_unit) == 0);
  CHECK(deb_unit.find("ExecStart=/usr/bin/pto-runner serve --root /usr/share/pto-runner/definitions --config "
                      "/etc/pto-runner/runner.yml") != std::string::npos);
  REQUIRE(sh("dpkg-deb -I " + deb, &info) == 0);
  CHECK(info.find("Package: pto-runner") != std::string::npos);
  CHECK(info.find("postinst") != std::string::npos);
  CHECK(info.find("conffiles") != std::string::npos);

  // No container here: the package is installed into this (throw-away) machine with dpkg -i, its daemon run
  // as the package's own user from the installed files, then purged.
  if (::geteuid() != 0 || !have("dpkg") || sh("dpkg-query -W -f='${Status}' pto-runner 2>/dev/null | grep -q installed") == 0) {
    WARN("SKIPPED: installing the .deb needs root, dpkg, and no pto-runner package installed already");
    return;
  }
  const int installed = sh("dpkg -i " + deb + " > " + (dir.path() / "dpkg.log").string() + " 2>&1");
  INFO(read_file(dir.path() / "dpkg.log"));
  REQUIRE(installed == 0);
  struct Purge {
    fs::path log;
    ~Purge() { sh("dpkg --purge pto-runner >> " + log.string() + " 2>&1"); }
  } purge{dir.path() / "dpkg.log"};
  CHECK(sh("getent passwd pto-step0 > /dev/null && getent passwd pto-step31 > /dev/null") == 0);  // postinst made the sandbox users
  // postinst ran doctor on the installed config: one line per check, the install not failed by what it found.
  const std::string dpkg_log = read_file(dir.path() / "dpkg.log");
  CHECK(dpkg_log.find("pto-runner doctor") != std::string::npos);
  CHECK(dpkg_log.find(" sandbox ") != std::string::npos);
  CHECK(sh("/usr/bin/task-submit --version", &out) == 0);
  // The unit's command line, as the unit's user (root), on a free port and a scratch state dir: it serves,
  // with its sandbox on (the users postinst made).
  const fs::path state = dir.path() / "state";
  REQUIRE(sh("chmod 755 " + dir.str()) == 0);
  const std::string serve = "/usr/bin/pto-runner serve --root /usr/share/pto-runner/definitions "
                            "--config /etc/pto-runner/runner.yml --listen 127.0.0.1:0 --steps-listen 127.0.0.1:0 --state-dir " + state.string() +
                            " --lock-dir " + (state / "locks").string();
  int pid = fork();
  if (pid == 0) {
    int fd = ::open((dir.path() / "serve.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close_range(3, ~0U, 0);
    execl("/bin/sh", "sh", "-c", ("exec " + serve).c_str(), (char*)nullptr);
    _exit(127);
  }
  std::string said;
  bool listening = wait_until([&] {
    said = read_file(dir.path() / "serve.out");
    return said.find("listening on http://127.0.0.1:") != std::string::npos;
  }, 20);
  INFO(said);
  if (listening) {
    int port = std::stoi(said.substr(said.find("127.0.0.1:") + 10));
    auto health = pto::api_request("GET", "http://127.0.0.1:" + std::to_string(port) + api_path::kHealthz);
    CHECK(health.status == 200);
    auto status = pto::api_request("GET", "http://127.0.0.1:" + std::to_string(port) + api_path::kStatus);
    CHECK(status.body.find("\"a2a3\"") != std::string::npos);  // the installed config's 8 a2a3 cards
    auto sandbox = nlohmann::json::parse(status.body)["sandbox"];
    CHECK(sandbox["active"] == true);
    CHECK(sandbox["users"] == 32);
  }
  CHECK(listening);
  ::kill(pid, SIGINT);
  ::waitpid(pid, nullptr, 0);

  // An upgrade under a running run, as the unit does it (no systemd here: its ExecStop's SIGUSR2 on a restart
  // is sent by hand): install again, the old daemon hands over, the new binary takes the run over.
  TempDir projdir;
  const fs::path proj = projdir.path();
  write_project(projdir, {{"slow.yml", "name: slow\nsteps:\n  - name: s\n    run: 'echo begin; sleep 4; echo upgraded-ok'\n"}});
  REQUIRE(sh("chmod -R o+rX " + proj.string() + " && chmod 755 " + proj.string()) == 0);
  const int port2 = free_tcp_port();
  const std::string serve2 = "/usr/bin/pto-runner serve --root " + proj.string() + " --listen 127.0.0.1:" + std::to_string(port2) +
                             " --state-dir " + (dir.path() / "state2").string() + " --lock-dir " + (dir.path() / "state2/locks").string();
  const std::string base = "http://127.0.0.1:" + std::to_string(port2);
  auto start_serve = [&](const fs::path& out) {
    int p = fork();
    if (p == 0) {
      int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close_range(3, ~0U, 0);
      execl("/bin/sh", "sh", "-c", ("exec " + serve2).c_str(), (char*)nullptr);
      _exit(127);
    }
    return p;
  };
  auto healthy = [&] { return pto::api_request("GET", base + api_path::kHealthz).status == 200; };
  int old_pid = start_serve(dir.path() / "serve2.out");
  REQUIRE(wait_until(healthy, 20));
  std::string token2 = read_file(dir.path() / "state2/token");
  while (!token2.empty() && token2.back() == '\n') token2.pop_back();
  auto made = pto::api_request("POST", base + api_path::kRuns, token2, R"({"jobs": ["slow"]})");
  REQUIRE(made.status == 201);
  const std::string run_id = nlohmann::json::parse(made.body)["id"];
  REQUIRE(wait_until([&] { return pto::api_request("GET", base + api_path::run(run_id)).body.find("\"running\"") != std::string::npos; }, 20));
  REQUIRE(sh("dpkg -i " + deb + " >> " + (dir.path() / "dpkg.log").string() + " 2>&1") == 0);  // the upgrade
  ::kill(old_pid, SIGUSR2);
  int old_status = -1;
  ::waitpid(old_pid, &old_status, 0);
  CHECK(WIFEXITED(old_status));
  CHECK(WEXITSTATUS(old_status) == 0);
  const auto restarted = std::chrono::steady_clock::now();
  int new_pid = start_serve(dir.path() / "serve3.out");
  REQUIRE(wait_until(healthy, 20));
  // How long the API was away is a figure (bench/daemon_start.sh), not a test's threshold: said here.
  WARN("API back " << std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count() << " s after the new daemon started");
  nlohmann::json upgraded;
  REQUIRE(wait_until([&] {
    upgraded = nlohmann::json::parse(pto::api_request("GET", base + api_path::run(run_id)).body, nullptr, false);
    return upgraded.is_object() && upgraded.value("state", "") != "running";
  }, 30));
  INFO(upgraded.dump(2));
  CHECK(upgraded["state"] == "succeeded");
  const auto log = pto::api_request("GET", base + api_path::step_log(run_id, "1-1"));
  CHECK(log.body.find("begin\n") != std::string::npos);
  CHECK(log.body.find("upgraded-ok\n") != std::string::npos);
  ::kill(new_pid, SIGINT);
  ::waitpid(new_pid, nullptr, 0);
  // The token it made is root's and no one else reads it; the state dir lists nothing to others.
  struct stat st {};
  CHECK(::stat((state / "token").c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  CHECK(::stat(state.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0711);
  // A purge takes the files, the unit and the user with it.
  REQUIRE(sh("dpkg --purge pto-runner >> " + (dir.path() / "dpkg.log").string() + " 2>&1") == 0);
  CHECK_FALSE(fs::exists("/usr/bin/pto-runner"));
  CHECK_FALSE(fs::exists("/usr/lib/systemd/system/pto-runner.service"));
  CHECK_FALSE(fs::exists("/etc/pto-runner/runner.yml"));
  CHECK(sh("getent passwd pto-step0 > /dev/null") != 0);
}
