// One pto-runner run per workflow run (SPEC "The switch-over", `submit --attach`): two clients of one key and
// sha share one run (the build they both need runs once) and each exits with its own job's result; an
// interrupted client cancels only its own job; another sha under the key is refused. Real daemon, real CLI
// clients, real signals.
#include <signal.h>

#include <catch2/catch.hpp>

#include "served_daemon.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

std::map<std::string, std::string> client_env(const Served& s) { return {{"PTO_RUNNER_SERVER", s.url()}, {"PTO_RUNNER_TOKEN", s.token}}; }

// The run id a client printed ("submitted run ID of ..." or "attached to run ID of ...").
std::string run_of(const std::string& out) {
  for (const char* said : {"submitted run ", "attached to run "})
    if (auto p = out.find(said); p != std::string::npos) {
      const auto from = p + std::string(said).size();
      return out.substr(from, out.find(' ', from) - from);
    }
  return "";
}

// Each job's state in a run's record, by name.
std::map<std::string, std::string> job_states(const json& run) {
  std::map<std::string, std::string> states;
  for (const auto& j : run["jobs"]) states[j["name"]] = j["state"];
  return states;
}

}  // namespace

TEST_CASE("attach: two clients of one workflow run share one run, the build both need runs once, each exits with its own job's "
          "result, an interrupted client cancels only its job, and another sha under the key is refused",
          "[attach]") {
  Served s;
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  write_project(s.dir, {{"build.yml", "name: build\nsteps:\n  - run: 'echo built >> " + (marks / "build").string() + "; sleep 1'\n"},
                        {"a.yml", "name: a\nneeds: [build]\nsteps:\n  - run: 'sleep 3; echo a passed'\n"},
                        {"b.yml", "name: b\nneeds: [build]\nsteps:\n  - run: 'echo b failed; exit 3'\n"},
                        {"c.yml", "name: c\nneeds: [build]\nsteps:\n  - run: 'echo started > " + (marks / "c-started").string() + "; sleep 60'\n"}});
  s.start();

  SECTION("two clients, one run") {
    Spawned a = spawn_cli({"submit", "--attach", "owner/repo/101/1", "--job", "a"}, client_env(s));
    Spawned b = spawn_cli({"submit", "--attach", "owner/repo/101/1", "--job", "b"}, client_env(s));
    CommandResult ra = wait_cli(a), rb = wait_cli(b);
    INFO(ra.out << ra.err << "\n---\n" << rb.out << rb.err);
    CHECK(ra.exit_code == 0);
    CHECK(rb.exit_code == 1);
    const std::string id = run_of(ra.out);
    REQUIRE_FALSE(id.empty());
    CHECK(run_of(rb.out) == id);
    CHECK(read_file(marks / "build") == "built\n");  // once for the workflow run
    // Each client shows its own job, not the other's.
    CHECK(ra.out.find("b failed") == std::string::npos);
    CHECK(rb.out.find("(this client's jobs)") != std::string::npos);
    json run = s.wait_run(id);
    std::map<std::string, std::string> states = job_states(run);
    CHECK(states["build"] == "succeeded");
    CHECK(states["a"] == "succeeded");
    CHECK(states["b"] == "failed");
    CHECK(states["c"] == "skipped");  // no client asked for it
    CHECK(run["request"]["attach"] == "owner/repo/101/1");
    CHECK(s.get(api_path::kRuns)["runs"].size() == 1);
  }

  SECTION("an interrupted client cancels only its own job, another sha is refused") {
    Spawned c = spawn_cli({"submit", "--attach", "owner/repo/102/1", "--sha", std::string(40, 'a'), "--job", "c"}, client_env(s));
    REQUIRE(wait_for_content(marks / "c-started", 30));
    Spawned a = spawn_cli({"submit", "--attach", "owner/repo/102/1", "--sha", std::string(40, 'a'), "--job", "a"}, client_env(s));
    CommandResult other = run_cli({"submit", "--attach", "owner/repo/102/1", "--sha", std::string(40, 'b'), "--job", "a"}, client_env(s));
    CHECK(other.exit_code == 2);
    CHECK(other.out.find("HTTP 409") != std::string::npos);
    CHECK(other.out.find("of commit " + std::string(40, 'a')) != std::string::npos);
    REQUIRE(wait_until([&] { return read_file(a.out).find("attached to run ") != std::string::npos; }, 20));
    ::kill(c.pid, SIGINT);
    CommandResult rc = wait_cli(c), ra = wait_cli(a);
    INFO(rc.out << rc.err << "\n---\n" << ra.out << ra.err);
    CHECK(rc.exit_code == 130);
    CHECK(ra.exit_code == 0);  // its job ran on, with the build both needed
    const std::string id = run_of(ra.out);
    CHECK(run_of(rc.out) == id);
    json run = s.wait_run(id);
    std::map<std::string, std::string> states = job_states(run);
    CHECK(states["build"] == "succeeded");
    CHECK(states["a"] == "succeeded");
    CHECK(states["c"] == "cancelled");
    CHECK(states["b"] == "skipped");
  }
}
