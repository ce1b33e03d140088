// A step cannot take the daemon's place (SPEC "A step cannot take the daemon's place"): the daemon's listening
// sockets stay bound across a SIGKILL and a SIGUSR2 hand-over (server/inherited_listeners: the step supervisor
// keeps copies; under systemd its socket units), and a client checks whom it talks to before it sends a token
// (client/listener_check). Real daemons, real sandbox users, real listeners of another uid.
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "sandbox_users.h"
#include "served_daemon.h"

using namespace pto::test;

namespace {

/// A world-writable directory in the test's tree (steps and other uids write their evidence there).
fs::path open_dir(const TempDir& dir, const std::string& name) {
  const fs::path p = dir.path() / name;
  fs::create_directories(p);
  REQUIRE(::chmod(p.c_str(), 01777) == 0);
  return p;
}

/// Starts tests/fixtures/impostor.py on `where` as `user` ("" for this process's own); it records what it is sent.
Background impostor(const TempDir& dir, const std::string& user, const std::string& where, const fs::path& record) {
  const fs::path log = dir.path() / ("impostor-" + std::to_string(free_tcp_port()) + ".log");
  const std::string script = (source_dir() / "tests/fixtures/impostor.py").string();
  std::vector<std::string> argv = {"/usr/bin/python3", script, where, record.string()};
  if (!user.empty()) argv.insert(argv.begin(), {"/usr/sbin/runuser", "-u", user, "--"});
  Background b = start_background(argv, log);
  REQUIRE(wait_until([&] { return read_file(log).find("ready") != std::string::npos; }, 20));
  return b;
}

}  // namespace

TEST_CASE("daemon address: a listener of another uid on the daemon's address is sent nothing: status, submit and task-submit "
          "refuse it, exit 3 and name its uid",
          "[security][listener]") {
  SKIP_UNLESS_ROOT();
  TempDir dir;
  open_to_sandbox(dir);
  const fs::path evidence = open_dir(dir, "evidence");
  write_project(dir, {{"j.yml", "name: j\nsteps:\n  - run: 'true'\n"}});
  const std::string secret = "admin-token-4711-never-elsewhere";
  const fs::path token = dir.write("token", secret + "\n");
  REQUIRE(::chmod(token.c_str(), 0600) == 0);

  // Stood up before any daemon, as user nobody, on the address the clients are told.
  const std::string where = "127.0.0.1:" + std::to_string(free_tcp_port());
  const fs::path record = evidence / "nobody-received";
  Background theirs = impostor(dir, "nobody", where, record);
  const std::string url = "http://" + where;

  CommandResult status = run_cli({"status", "--server", url, "--token-file", token.string()});
  CHECK(status.exit_code == 3);
  CHECK(status.err.find("uid 65534 (nobody)") != std::string::npos);
  CommandResult submit = run_cli({"--root", dir.str(), "submit", "--server", url, "--token-file", token.string(), "--job", "j", "--wait"});
  INFO(submit.out << submit.err);
  CHECK(submit.exit_code == 3);
  CHECK(submit.err.find("uid 65534") != std::string::npos);
  CommandResult lease = run_cli({"task-submit", "--server", url, "--device-num", "1", "--run", "true"}, {{"PTO_RUNNER_TOKEN", secret}});
  INFO(lease.out << lease.err);
  CHECK(lease.exit_code == 3);
  CHECK(lease.err.find("uid 65534") != std::string::npos);
  // Nothing reached it: not a byte, let alone the token.
  CHECK_FALSE(fs::exists(record));

  // Over a Unix socket the same: its listener's credentials are nobody's.
  const std::string sock = (evidence / "api.sock").string();
  Background theirs_unix = impostor(dir, "nobody", "unix:" + sock, record);
  CommandResult over_unix = run_cli({"status", "--server", "unix:" + sock, "--token-file", token.string()});
  CHECK(over_unix.exit_code == 3);
  CHECK(over_unix.err.find("uid 65534") != std::string::npos);
  CHECK_FALSE(fs::exists(record));

  // The recorder does record: the same listener run as root (whom clients trust) is sent the request and its token.
  const std::string root_where = "127.0.0.1:" + std::to_string(free_tcp_port());
  const fs::path root_record = evidence / "root-received";
  Background ours = impostor(dir, "", root_where, root_record);
  run_cli({"status", "--server", "http://" + root_where, "--token-file", token.string()});
  CHECK(read_file(root_record).find("Bearer " + secret) != std::string::npos);
}

TEST_CASE("daemon address: while the daemon is SIGKILLed and while it hands over with SIGUSR2, a sandboxed step cannot bind its "
          "ports: the next daemon listens on the same ones and a victim run's leases are granted",
          "[security][listener][supervise][sandbox]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 2);
  s.devices = "0,1";
  s.listen = "127.0.0.1:" + std::to_string(free_tcp_port());
  const fs::path marks = open_dir(s.dir, "marks");
  const std::string m = marks.string();
  const std::string loop = (source_dir() / "tests/fixtures/bind_loop.py").string();
  fs::copy_file(loop, s.dir.path() / "bind_loop.py");
  // The hostile step tries the API's port and its own run's endpoint (PTO_RUNNER_SERVER) until told to stop.
  write_project(s.dir, {{"attack.yml", "name: attack\nsteps:\n  - name: take the ports\n    run: |\n"
                                       "      steps_port=${PTO_RUNNER_SERVER##*:}\n"
                                       "      ls -l /proc/$$/fd | grep -c socket: > " + m + "/inherited-sockets || true\n"
                                       "      touch " + m + "/attacking\n"
                                       "      python3 " + (s.dir.path() / "bind_loop.py").string() + " " + m + "/stop " + m +
                                       "/received " + std::to_string(std::stoi(s.listen.substr(10))) + " $steps_port\n"},
                        {"victim.yml", "name: victim\nsteps:\n  - name: lease cards\n    run: |\n"
                                       "      for i in $(seq 1 30); do\n"
                                       "        task-submit --device-num 1 --timeout 60 --run 'echo leased $TASK_DEVICE'\n"
                                       "        [ -e " + m + "/stop ] && break\n"
                                       "        sleep 0.2\n"
                                       "      done\n"
                                       "      echo victim done\n"}});
  s.start();
  const int port = s.port;
  const std::string attack = s.submit_run({{"jobs", {"attack"}}});
  REQUIRE(wait_until([&] { return fs::exists(marks / "attacking"); }, 30));
  // A root client follows the victim's run across both restarts with the admin token.
  Spawned follower = spawn_cli({"submit", "--server", s.url(), "--token-file", (fs::path(s.state()) / "token").string(), "--job", "victim",
                                "--wait", "--poll-interval", "0.2"});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::string steps_port = read_file(fs::path(s.state()) / "steps-endpoint-port");

  s.stop(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // no daemon: the step tries meanwhile
  s.start();
  CHECK(s.port == port);
  CHECK(read_file(fs::path(s.state()) / "steps-endpoint-port") == steps_port);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  s.stop(SIGUSR2);  // the documented restart
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  s.start();
  CHECK(s.port == port);
  CHECK(read_file(fs::path(s.state()) / "steps-endpoint-port") == steps_port);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::ofstream(marks / "stop") << "";

  const json a = s.wait_run(attack, 60);
  INFO(a.dump(2));
  const std::string attack_log = pto::api_request("GET", s.url(api_path::step_log(attack, "1-1"))).body;
  INFO(attack_log);
  CHECK(attack_log.find("BOUND") == std::string::npos);
  CHECK(attack_log.find("refused ") != std::string::npos);
  CHECK_FALSE(fs::exists(marks / "received"));
  CHECK(read_file(marks / "inherited-sockets") == "0\n");  // no copy of a listener (or any socket) reached the step
  CommandResult followed = wait_cli(follower);
  INFO(followed.out << followed.err << "\nthe daemon said: " << read_file(s.proc.err));
  CHECK(followed.exit_code == 0);
  const json runs = s.get(api_path::kRuns)["runs"];
  std::string victim;
  for (const auto& r : runs)
    if (r["id"] != attack) victim = r["id"];
  REQUIRE_FALSE(victim.empty());
  const std::string victim_log = pto::api_request("GET", s.url(api_path::step_log(victim, "1-1"))).body;
  INFO(victim_log);
  CHECK(victim_log.find("leased ") != std::string::npos);
  CHECK(victim_log.find("victim done") != std::string::npos);
  CHECK(s.get(api_path::run(victim))["state"] == "succeeded");
}

TEST_CASE("daemon address: sockets passed by systemd's socket activation (LISTEN_FDS) are the daemon's: it serves the API and "
          "its steps there and binds nothing itself",
          "[listener][systemd]") {
  if (!have("systemd-socket-activate")) {
    WARN("SKIPPED: needs systemd-socket-activate (Debian's systemd)");
    return;
  }
  TempDir dir;
  write_project(dir, {{"lease.yml", "name: lease\nsteps:\n  - run: task-submit --device-num 1 --run 'echo got $TASK_DEVICE'\n"}});
  const int api = free_tcp_port(), steps = free_tcp_port();
  const std::string state = (dir.path() / "state").string();
  // systemd's own tool binds both and execs the daemon with them as descriptors 3 and 4, named as the units name
  // them. Had the daemon bound the addresses itself, it would have failed: they are taken (no SO_REUSEPORT).
  Background daemon = start_background({"/usr/bin/systemd-socket-activate", "-l", "127.0.0.1:" + std::to_string(api), "-l",
                                        "127.0.0.1:" + std::to_string(steps), "--fdname=api:steps", PTO_RUNNER_BIN, "serve", "--root",
                                        dir.str(), "--listen", "127.0.0.1:" + std::to_string(api), "--steps-listen",
                                        "127.0.0.1:" + std::to_string(steps), "--state-dir", state, "--lock-dir", state + "/locks",
                                        "--devices", "1"},
                                       dir.path() / "daemon.log");
  REQUIRE(wait_until([&] { return read_file(dir.path() / "daemon.log").find(" as 4.") != std::string::npos; }, 20));  // both bound
  const std::string base = "http://127.0.0.1:" + std::to_string(api);
  // The first connection is what makes systemd-socket-activate start the daemon; it waits in the queue meanwhile.
  auto health = pto::api_request("GET", base + api_path::kHealthz, "", "", 30);
  INFO(read_file(dir.path() / "daemon.log"));
  REQUIRE(health.status == 200);
  std::string token = read_file(fs::path(state) / "token");
  token.erase(token.find('\n'));
  auto made = pto::api_request("POST", base + api_path::kRuns, token, R"({"jobs": ["lease"]})");
  REQUIRE(made.status == 201);
  const std::string id = nlohmann::json::parse(made.body)["id"];
  nlohmann::json run;
  REQUIRE(wait_until([&] {
    run = nlohmann::json::parse(pto::api_request("GET", base + api_path::run(id)).body, nullptr, false);
    return run.is_object() && run.value("state", "") != "running";
  }, 30));
  INFO(run.dump(2));
  CHECK(run["state"] == "succeeded");
  // The step reached the daemon on the socket given for it (its lease was granted there).
  CHECK(read_file(fs::path(state) / "steps-endpoint-port") == std::to_string(steps) + "\n");
  CHECK(pto::api_request("GET", base + api_path::step_log(id, "1-1")).body.find("got 0") != std::string::npos);
  CHECK(read_file(dir.path() / "daemon.log").find("no longer listens") == std::string::npos);
}
