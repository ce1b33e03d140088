// `pto-runner doctor` on two hosts made by the test (as root): one missing cgroup delegation (cgroup2
// unmounted in a mount namespace of its own), the env-file keys the definitions require and the sandbox users;
// one complete (card files standing in for /dev/davinci*, its group given to the sandbox users, a root lock
// dir, a 0600 token, users made with useradd and removed after, a fake npu-smi).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

using namespace pto::test;
using nlohmann::json;

namespace {

/// A host for doctor under `d`: runner.yml naming its card files, lock dir, token and sandbox users.
void make_host(TempDir& d, const std::string& users, const std::string& env_file_text) {
  for (int i = 0; i < 2; ++i) d.write("dev/davinci" + std::to_string(i), "");
  d.write("dev/davinci_manager", "");
  REQUIRE(sh("chgrp -R daemon " + (d.path() / "dev").string() + " && chmod 0660 " + (d.path() / "dev").string() + "/*") == 0);
  fs::create_directories(d.path() / "locks");
  fs::permissions(d.path() / "locks", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                                          fs::perms::others_exec);
  d.write("token", "0123456789abcdef0123456789abcdef\n");
  fs::permissions(d.path() / "token", fs::perms::owner_read | fs::perms::owner_write);
  d.write("host.env", env_file_text);
  d.write("runner.yml", "devices:\n  ids: [0, 1]\n  lock-dir: " + (d.path() / "locks").string() + "\n  card-files: " +
                            (d.path() / "dev/davinci{id}").string() + "\n  shared-files: [" + (d.path() / "dev/davinci_manager").string() +
                            "]\ntoken-file: " + (d.path() / "token").string() + "\nenv-file: host.env\nsandbox:\n  users: " + users +
                            "\n  count: 2\ncaches:\n  group: " + users + "c\n");
  write_project(d, {{"b.yml", "name: b\nsteps:\n  - run: |\n      : \"${CI_CACHE_ROOT:?set it in the runner's .env}\"\n"
                              "      eval \"$(tool export)\"\n      : \"${TOOL_HOME:?set by tool export}\"\n"}});
  d.write("bin/npu-smi", "#!/bin/sh\necho npu-smi\n");
  fs::permissions(d.path() / "bin/npu-smi", fs::perms::owner_all);
}

json doctor_json(const TempDir& d, const std::string& wrap = "") {
  std::string out;
  sh("PATH=" + (d.path() / "bin").string() + ":$PATH " + wrap + "'" + std::string(PTO_RUNNER_BIN) + "' --root '" + d.str() +
         "' doctor --format json --state-dir '" + (d.path() / "state").string() + "'",
     &out);
  INFO(out);
  return json::parse(out);
}

std::string status_of(const json& report, const std::string& check) {
  for (const auto& c : report["checks"])
    if (c["check"] == check) return c["status"];
  return "missing";
}

}  // namespace

TEST_CASE("doctor: a host without cgroup delegation, the env-file keys and the sandbox users fails each, exit 2, and "
          "a complete host passes, exit 0", "[doctor]") {
  if (::geteuid() != 0 || sh("command -v useradd >/dev/null && command -v unshare >/dev/null") != 0) {
    WARN("SKIPPED: doctor's host checks need root (users, a mount namespace)");
    return;
  }
  SECTION("missing") {
    TempDir d;
    make_host(d, "ptodocx", "OTHER=1\n");
    // cgroup2 gone in a mount namespace of doctor's own: as on a host that does not delegate it.
    json r = doctor_json(d, "unshare -m sh -c 'for m in $(grep cgroup2 /proc/self/mountinfo | cut -d\" \" -f5); do umount -l $m; done; exec \"$0\" \"$@\"' ");
    CHECK(r["exit_code"] == 2);
    CHECK(status_of(r, "cgroup") == "FAIL");
    CHECK(status_of(r, "env") == "FAIL");
    CHECK(status_of(r, "sandbox") == "FAIL");
    CHECK(status_of(r, "caches") == "FAIL");  // no cache group: protected runs could not write main's tier
    for (const auto& c : r["checks"])
      if (c["status"] == "FAIL") CHECK_FALSE(c["fix"].get<std::string>().empty());  // every failure says what to do
    CHECK(r.dump().find("CI_CACHE_ROOT") != std::string::npos);
    CHECK(r.dump().find("TOOL_HOME") == std::string::npos);  // set by the step itself, after its eval
    CHECK(r.dump().find("pto-runner sandbox setup") != std::string::npos);
  }
  SECTION("complete") {
    TempDir d;
    make_host(d, "ptodoc", "CI_CACHE_ROOT=/srv/cache\n");
    struct Users {
      Users() {
        for (const char* u : {"ptodoc0", "ptodoc1"}) REQUIRE(sh(std::string("useradd -M -r -s /usr/sbin/nologin ") + u) == 0);
        REQUIRE(sh("groupadd -r ptodocc") == 0);
      }
      ~Users() {
        for (const char* u : {"ptodoc0", "ptodoc1"}) sh(std::string("userdel ") + u);
        sh("groupdel ptodocc");
      }
    } users;
    json r = doctor_json(d);
    INFO(r.dump(2));
    if (status_of(r, "cgroup") != "ok") {
      WARN("SKIPPED: this machine delegates no cgroup v2");
      return;
    }
    CHECK(r["exit_code"] == 0);
    for (const auto& c : r["checks"]) CHECK(c["status"] == "ok");
    // A protected tier another user could write is refused.
    const fs::path tier = d.path() / "state/caches/ccache/protected";
    fs::create_directories(tier);
    REQUIRE(::chmod(tier.c_str(), 0777) == 0);
    json bad = doctor_json(d);
    CHECK(status_of(bad, "caches") == "FAIL");
    CHECK(bad.dump().find("protected is writable by others") != std::string::npos);
  }
}
