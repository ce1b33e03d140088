// Local submitters (SPEC "Who may do what through the API"): over runner.yml's `listen-unix` socket the kernel
// names the caller (SO_PEERCRED); a member of `submit-group` submits and follows without any token (a fork's
// pull request has no secrets), cancels its own runs only and never drains a card. Real users and groups
// (useradd/groupadd, removed after), real sandbox users, the real CLI over the real socket. Root only.
#include <grp.h>

#include <catch2/catch.hpp>

#include "sandbox_users.h"
#include "served_daemon.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

/// A group and two plain users, one in it: made for the test, removed after.
struct LocalUsers {
  std::string tag = pto::random_hex(2);
  std::string group = "ptsg" + tag, member = "ptsm" + tag, outsider = "ptso" + tag;
  LocalUsers() {
    REQUIRE(sh("groupadd " + group) == 0);
    REQUIRE(sh("useradd -M -s /bin/sh -G " + group + " " + member) == 0);
    REQUIRE(sh("useradd -M -s /bin/sh " + outsider) == 0);
  }
  ~LocalUsers() {
    for (const auto& u : {member, outsider}) sh("pkill -9 -u " + u + " 2>/dev/null; userdel " + u + " 2>/dev/null");
    sh("groupdel " + group + " 2>/dev/null");
  }
  uid_t uid(const std::string& name) const { return ::getpwnam(name.c_str())->pw_uid; }
};

/// `pto-runner ARGS` as `user`, with nothing of ours in its environment (no token): exit code, output in `out`.
int as_user(const std::string& user, const std::string& args, std::string* out) {
  return sh("cd / && runuser -u " + user + " -- env -i PATH=/usr/bin:/bin " PTO_RUNNER_BIN " " + args + " 2>&1", out);
}

}  // namespace

TEST_CASE("local submitters: a member of submit-group submits over listen-unix without a token and cancels its own run only, "
          "never drains, while a user outside it, a sandbox user and a run's lease token cannot submit",
          "[sandbox]") {
  SKIP_UNLESS_ROOT();
  LocalUsers users;
  Served s;
  open_to_sandbox(s.dir);
  const std::string sock = (s.dir.path() / "run" / "api.sock").string();
  SandboxUsers sandbox(s.dir, 1, "listen-unix: " + sock + "\nsubmit-group: " + users.group + "\n");
  const std::string marks = (s.dir.path() / "marks").string();
  fs::create_directories(marks);
  ::chmod(marks.c_str(), 01777);
  // A step (its run's sandbox user) tries both ways in: the socket, and its own lease token on its endpoint.
  write_project(s.dir, {{"idle.yml", "name: idle\nsteps:\n  - run: 'echo hello from $(id -un)'\n"},
                        {"long.yml", "name: long\nsteps:\n  - run: 'sleep 60'\n"},
                        {"probe.yml", "name: probe\nsteps:\n  - run: |\n"
                                      "      curl -s -o /dev/null -w '%{http_code}' --unix-socket " + sock +
                                      " -X POST -d '{}' http://localhost/api/v1/runs > " + marks + "/socket || echo \" $?\" >> " + marks + "/socket\n"
                                      "      curl -s -o /dev/null -w '%{http_code}' -H \"Authorization: Bearer $PTO_RUNNER_LEASE_TOKEN\" "
                                      "-X POST -d '{}' $PTO_RUNNER_SERVER/api/v1/runs > " + marks + "/token\n"}});
  s.start();
  struct stat st {};
  REQUIRE(::stat(sock.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == ::getgrnam(users.group.c_str())->gr_gid);

  // The member: submits and follows over the socket, no token anywhere; the run says who submitted it.
  std::string out;
  CHECK(as_user(users.member, "submit --server unix:" + sock + " --job idle --wait", &out) == 0);
  INFO(out);
  CHECK(out.find("submitted run ") != std::string::npos);
  const std::string mine = out.substr(out.find("submitted run ") + 14, out.find(':', out.find("submitted run ")) - out.find("submitted run ") - 14);
  json run = s.wait_run(mine);
  CHECK(run["state"] == "succeeded");
  CHECK(run["request"]["submitter"]["uid"] == users.uid(users.member));
  CHECK(run["request"]["submitter"]["user"] == users.member);

  // The outsider cannot even connect (the socket is root:GROUP 0660): nothing is submitted.
  const auto before = s.get(api_path::kRuns)["runs"].size();
  CHECK(as_user(users.outsider, "submit --server unix:" + sock + " --job idle", &out) == 3);
  INFO(out);
  CHECK(out.find("cannot reach unix:" + sock) != std::string::npos);
  CHECK(s.get(api_path::kRuns)["runs"].size() == before);

  // A step: neither over the socket (its sandbox user is not in the group) nor with its run's lease token.
  CHECK(s.wait_run(s.submit_run({{"jobs", {"probe"}}}))["state"] == "succeeded");
  CHECK(read_file(fs::path(marks) / "socket") == "000 7\n");  // curl: could not connect
  CHECK(read_file(fs::path(marks) / "token") == "401");

  // Its own running run it cancels; the admin's it may not (403), nor drain a card.
  CHECK(as_user(users.member, "submit --server unix:" + sock + " --job long", &out) == 0);
  const std::string own = out.substr(out.find("submitted run ") + 14, out.find(':', out.find("submitted run ")) - out.find("submitted run ") - 14);
  const std::string admins = s.submit_run({{"jobs", {"long"}}});
  auto curl_as = [&](const std::string& user, const std::string& path, std::string* body) {
    return sh("runuser -u " + user + " -- curl -s -w '\\n%{http_code}' --unix-socket " + sock + " -X POST -d '{}' http://localhost" + path, body);
  };
  std::string body;
  curl_as(users.member, api_path::run_cancel(admins), &body);
  CHECK(body.find("it may cancel the runs it submitted") != std::string::npos);
  CHECK(body.substr(body.size() - 3) == "403");
  curl_as(users.member, api_path::device(0, "drain"), &body);
  CHECK(body.find("not drain or return cards") != std::string::npos);
  CHECK(body.substr(body.size() - 3) == "403");
  curl_as(users.member, api_path::run_cancel(own), &body);
  CHECK(body.substr(body.size() - 3) == "202");
  CHECK(s.wait_run(own)["state"] == "cancelled");
  CHECK(s.get(api_path::run(admins))["state"] == "running");
  CHECK(s.get(api_path::kStatus)["devices"][0]["state"] != "drained");
  REQUIRE(s.post(api_path::run_cancel(admins), json::object()).status == 202);
  s.wait_run(admins);
  s.stop();

  // A sandbox user in the group: serve refuses to start, naming it (a step could otherwise submit runs).
  REQUIRE(sh("usermod -aG " + users.group + " " + sandbox.prefix + "0") == 0);
  CommandResult refused = run_cli({"serve", "--root", s.dir.str(), "--listen", "127.0.0.1:0", "--state-dir", s.state()});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("submit-group: sandbox user " + sandbox.prefix + "0 is in group " + users.group) != std::string::npos);
}
