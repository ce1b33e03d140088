// Who may read and over what (SPEC: Who may do what through the API): beyond loopback every GET needs a token
// and the listener TLS or an explicit insecure-listen; token files readable by others are refused; one
// client's connections are capped so another's requests are still answered; the log names the address bound.
#include <catch2/catch.hpp>

#include "sandbox_users.h"
#include "served_daemon.h"
#include "util/api_paths.h"

using namespace pto::test;

namespace {

void private_file(const TempDir& d, const std::string& rel, const std::string& text) {
  d.write(rel, text);
  fs::permissions(d.path() / rel, fs::perms::owner_read | fs::perms::owner_write);
}

CommandResult serve_once(const TempDir& d, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"serve", "--root", d.str(), "--state-dir", (d.path() / "state").string(), "--lock-dir",
                                   (d.path() / "locks").string(), "--devices", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

}  // namespace

TEST_CASE("api access: a listen beyond loopback needs tls or insecure-listen, token files others can read are "
          "refused, exit 2", "[api]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: 'true'\n"}});
  CommandResult open = serve_once(d, {"--listen", "0.0.0.0:0"});
  CHECK(open.exit_code == 2);
  CHECK(open.err.find("listen 0.0.0.0:0 is not loopback: give tls: {cert, key} in runner.yml, or insecure-listen: true") != std::string::npos);
  d.write("loose-token", "0123456789abcdef0123456789abcdef\n");  // 0644
  CommandResult loose = serve_once(d, {"--listen", "127.0.0.1:0", "--token-file", (d.path() / "loose-token").string()});
  CHECK(loose.exit_code == 2);
  CHECK(loose.err.find("loose-token can be read by other users (mode 0644)") != std::string::npos);
}

TEST_CASE("api access: beyond loopback an unauthenticated GET is 401, the read token reads and cannot write, and the "
          "log names the address really bound", "[api]") {
  Served s;
  private_file(s.dir, "read-token", "reader-reader-reader-reader\n");
  s.dir.write("runner.yml", "insecure-listen: true\nread-token-file: read-token\n");
  write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - run: 'true'\n"}});
  s.listen = "0.0.0.0:0";
  s.start();
  const std::string said = read_file(s.proc.out) + read_file(s.proc.err);
  CHECK(said.find("listening on http://0.0.0.0:") != std::string::npos);
  CHECK(said.find("insecure-listen: serving plain HTTP on 0.0.0.0:") != std::string::npos);
  for (const char* path : {api_path::kStatus, api_path::kRuns, api_path::kMetrics, "/"})
    CHECK(pto::api_request("GET", s.url(path)).status == 401);
  CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).status == 200);  // probes need nothing
  CHECK(pto::api_request("GET", s.url(api_path::kStatus), "reader-reader-reader-reader").status == 200);
  CHECK(pto::api_request("GET", s.url(api_path::kStatus), s.token).status == 200);
  CHECK(s.post(api_path::kRuns, json::object(), "reader-reader-reader-reader").status == 401);
  CHECK(s.post(api_path::kRuns, json::object()).status == 201);
}

TEST_CASE("api access: beyond loopback, submit --wait --follow with the admin token follows its run to the end and prints "
          "its log, and status and devices read with a read token",
          "[api]") {
  Served s;
  private_file(s.dir, "read-token", "reader-reader-reader-reader\n");
  s.dir.write("runner.yml", "insecure-listen: true\nread-token-file: read-token\n");
  write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - {name: hello, run: 'echo hello from the step; sleep 0.3; echo done'}\n"}});
  s.listen = "0.0.0.0:0";
  s.start();
  CHECK(pto::api_request("GET", s.url(api_path::kStatus)).status == 401);
  CommandResult r = run_cli({"submit", "--server", s.url(), "--wait", "--follow", "--poll-interval", "0.1"}, {{"PTO_RUNNER_TOKEN", s.token}});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("[a / hello] hello from the step") != std::string::npos);
  CHECK(r.out.find(": succeeded") != std::string::npos);
  CHECK(r.err.find("lost the server") == std::string::npos);
  // A person's status and card list beyond loopback: with the read token, or refused as unauthorised without.
  const std::map<std::string, std::string> reader = {{"PTO_RUNNER_TOKEN", "reader-reader-reader-reader"}};
  CommandResult status = run_cli({"status", "--server", s.url()}, reader);
  CHECK(status.exit_code == 0);
  CHECK(status.out.find("pto-runner ") != std::string::npos);
  CHECK(run_cli({"devices", "--server", s.url()}, reader).exit_code == 0);
  CommandResult anonymous = run_cli({"status", "--server", s.url()}, {{"PTO_RUNNER_TOKEN", ""}});
  CHECK(anonymous.exit_code == 3);
  CHECK(anonymous.err.find("HTTP 401") != std::string::npos);
}

TEST_CASE("api access: tls: {cert, key} serves HTTPS only", "[api]") {
  if (sh("command -v openssl >/dev/null && command -v curl >/dev/null") != 0) {
    WARN("SKIPPED: openssl and curl are needed to make and test a certificate");
    return;
  }
  Served s;
  REQUIRE(sh("cd " + s.dir.str() + " && openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 1 "
             "-subj /CN=localhost >/dev/null 2>&1") == 0);
  s.dir.write("runner.yml", "tls: {cert: cert.pem, key: key.pem}\n");
  write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - run: 'true'\n"}});
  s.listen = "0.0.0.0:0";
  s.scheme = "https";
  s.start();
  std::string out;
  CHECK(sh("curl -sk https://127.0.0.1:" + std::to_string(s.port) + api_path::kHealthz, &out) == 0);
  CHECK(out == "ok\n");
  CHECK(sh("curl -s --max-time 5 http://127.0.0.1:" + std::to_string(s.port) + api_path::kHealthz, &out) != 0);
  // Reads beyond loopback need a token, over TLS too.
  CHECK(sh("curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:" + std::to_string(s.port) + api_path::kStatus, &out) == 0);
  CHECK(out == "401");
  CHECK(sh("curl -sk -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer " + s.token + "' https://127.0.0.1:" +
               std::to_string(s.port) + api_path::kStatus, &out) == 0);
  CHECK(out == "200");
}

TEST_CASE("api access: one local user holding max-connections-per-client connections is answered 503 on the next, "
          "while another user is still served", "[api]") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: a second local user needs root");
    return;
  }
  Served s;
  s.dir.write("runner.yml", "max-connections-per-client: 8\n");
  write_project(s.dir, {{"a.yml", "name: a\nsteps:\n  - run: 'true'\n"}});
  s.start();
  std::string out;
  // 8 idle connections of this user (root); its 9th gets 503 for an ordinary read (the probe still gets through);
  // user nobody, from the same 127.0.0.1, gets 200.
  REQUIRE(sh("python3 - <<'EOF'\n"
             "import os, socket\n"
             "port = " + std::to_string(s.port) + "\n"
             "held = [socket.create_connection(('127.0.0.1', port)) for _ in range(8)]\n"
             "def get(path='/api/v1/status'):\n"
             "    c = socket.create_connection(('127.0.0.1', port))\n"
             "    c.sendall(b'GET ' + path.encode() + b' HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\n"
             "    data = b''\n"
             "    while True:\n"
             "        b = c.recv(4096)\n"
             "        if not b: break\n"
             "        data += b\n"
             "    return data.split(b' ')[1].decode()\n"
             "mine = get() + ',' + get('/healthz')\n"
             "r, w = os.pipe()\n"
             "if os.fork() == 0:\n"
             "    os.setgid(65534); os.setuid(65534)\n"
             "    os.write(w, get().encode()); os._exit(0)\n"
             "os.wait()\n"
             "print(mine, os.read(r, 16).decode())\n"
             "EOF", &out) == 0);
  CHECK(out == "503,200 200\n");
}

TEST_CASE("api access: 600 idle connections of one local user: its extra ones are closed at once, the idle ones after "
          "request-timeout-seconds, and meanwhile another user's /healthz, status, submit --wait and a running step's "
          "task-submit lease all succeed",
          "[api]") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: a second local user needs root");
    return;
  }
  Served s;
  s.dir.write("runner.yml", "request-timeout-seconds: 5\n");
  write_project(s.dir, {{"lease.yml", "name: lease\nsteps:\n  - name: borrow\n    run: task-submit --device-num 1 --run 'echo leased card $TASK_DEVICE'\n"}});
  s.start();
  // User nobody holds 600 connections that send nothing (its script and report in a directory it may use).
  TempDir theirs;
  fs::permissions(theirs.path(), fs::perms::all);
  fs::copy_file(source_dir() / "tests/fixtures/hold_connections.py", theirs.path() / "hold.py");
  const fs::path report = theirs.path() / "held.json";
  REQUIRE(sh("setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 " + (theirs.path() / "hold.py").string() + " " +
             std::to_string(s.port) + " 600 " + report.string() + " 1.5 11 >/dev/null 2>&1 &") == 0);
  REQUIRE(wait_for_content(report.string() + ".ready", 30));  // made, then written: its count once it is there
  CHECK(std::stoi(read_file(report.string() + ".ready")) == 600);  // connected (the kernel's backlog), then judged
  // Another user (root) meanwhile: the probe, the status, a whole run whose step leases a card.
  CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).status == 200);
  CHECK(pto::api_request("GET", s.url(api_path::kStatus)).status == 200);
  CommandResult run = run_cli({"submit", "--server", s.url(), "--wait", "--follow", "--poll-interval", "0.1"}, {{"PTO_RUNNER_TOKEN", s.token}});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("leased card 0") != std::string::npos);
  REQUIRE(wait_until([&] { return fs::exists(report) && !read_file(report).empty(); }, 30));
  const json held = json::parse(read_file(report));
  INFO(held.dump());
  CHECK(held["opened"] == 600);
  // At 1.5 s: all but its 64 (max-connections-per-client) were closed (16 of them after one read's 2 s at
  // most); its 64 idle ones went after request-timeout-seconds (5 s; looked at after 11 s: under a loaded CI machine once
  // seen not yet closed at 8 s).
  CHECK(held["closed_early"].get<int>() >= 600 - 64 - 16);
  CHECK(held["closed_early"].get<int>() <= 600 - 64);
  CHECK(held["closed_late"] == 600);
}

TEST_CASE("api access: a sandboxed step holding 600 idle connections to the daemon's port locks out nobody: another run's "
          "step leases a card, the status and the probe answer",
          "[api]") {
  SKIP_UNLESS_ROOT();
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 2, "request-timeout-seconds: 5\n");
  TempDir theirs;  // where the flooding step writes what it saw (and prints it)
  fs::permissions(theirs.path(), fs::perms::all);
  s.dir.write("hold.py", read_file(source_dir() / "tests/fixtures/hold_connections.py"));
  const fs::path report = theirs.path() / "held.json";
  write_project(s.dir, {{"flood.yml", "name: flood\nsteps:\n  - run: /usr/bin/python3 " + (s.dir.path() / "hold.py").string() +
                                          " \"$PORT\" 600 " + report.string() + " 1.5 8 && cat " + report.string() + "\n"},
                        {"lease.yml", "name: lease\nsteps:\n  - run: task-submit --device-num 1 --run 'echo leased card $TASK_DEVICE'\n"}});
  s.start();
  const std::string flood = s.submit_run({{"jobs", {"flood"}}, {"env", {{"PORT", std::to_string(s.port)}}}});
  REQUIRE(wait_until([&] { return fs::exists(report.string() + ".ready"); }, 30));
  CHECK(pto::api_request("GET", s.url(api_path::kHealthz)).status == 200);
  CHECK(pto::api_request("GET", s.url(api_path::kStatus)).status == 200);
  CommandResult run = run_cli({"submit", "--server", s.url(), "--job", "lease", "--wait", "--follow", "--poll-interval", "0.1"},
                              {{"PTO_RUNNER_TOKEN", s.token}});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("leased card 0") != std::string::npos);
  CHECK(s.wait_run(flood, 60)["state"] == "succeeded");
  // What it saw, from its log: its files in a world-writable directory go with its user (sandbox/user_leftovers).
  const std::string log = pto::api_request("GET", s.url(api_path::step_log(flood, "1-1"))).body;
  INFO(log);
  REQUIRE(log.find('{') != std::string::npos);
  const json held = json::parse(log.substr(log.find('{')));
  INFO(held.dump());
  CHECK(held["closed_early"].get<int>() >= 600 - 64 - 16);  // counted as its own user, not as 127.0.0.1
  CHECK(held["closed_late"] == 600);
}

