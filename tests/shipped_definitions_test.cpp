// The shipped jobs/ and models/ run for real in a stand-in of pypto's main branch (tests/fixtures/pypto-main:
// every path where pypto has it, fake host tools that check flags as pypto's conftest and pypto-lib's scripts
// do), on 8 a2a3 cards in pairs and 2 a5 cards, with the pin set up from a local wheel.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "pypto_main.h"
#include "test_support.h"

using namespace pto::test;
using nlohmann::json;


TEST_CASE("shipped definitions: lint --strict and plan are clean against a host with a2a3 and a5 cards", "[shipped]") {
  PyptoMain p;
  CommandResult lint = p.cli({"lint", "--strict"});
  INFO(lint.out << lint.err);
  CHECK(lint.exit_code == 0);
  CommandResult plan = p.cli({"plan", "--format", "json"});
  REQUIRE(plan.exit_code == 0);
  json j = json::parse(plan.out);
  std::set<std::string> jobs;
  for (const auto& job : j["jobs"]) jobs.insert(job["name"]);
  CHECK(jobs == std::set<std::string>{"toolchain", "build", "system-tests", "system-tests-direct", "dist-system-tests",
                                      "mixed-kernel-tests-a5", "pypto-lib-checkout", "pypto-lib-model", "system-tests-a5sim", "qwen3-perf"});
  // No needs pypto's CI does not have, but the shared build and the pypto-lib clone (steps of its jobs there).
  for (const auto& job : j["jobs"])
    for (const auto& need : job["needs"])
      CHECK((need == "toolchain" || need == "build" ||
             (need == "pypto-lib-checkout" && (job["name"] == "pypto-lib-model" || job["name"] == "qwen3-perf"))));
}

TEST_CASE("shipped definitions: run --simulate on cards typed on the command line (a2a3:0-7,a5:8-9) succeeds", "[shipped]") {
  TempDir d;
  for (const char* dir : {"jobs", "models", "toolchain"}) fs::copy(source_dir() / dir, d.path() / dir, fs::copy_options::recursive);
  CommandResult r = run_cli({"--root", d.str(), "run", "--simulate", "--simulate-toolchain", "--time-scale", "0.0001", "--devices",
                             "a2a3:0-7,a5:8-9", "--lock-dir", (d.path() / "locks").string(), "--state-dir", (d.path() / "state").string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("makespan") != std::string::npos);
  // Untyped, the same definitions cannot be placed: every a2a3 and a5 step is refused at its line.
  CommandResult untyped = run_cli({"--root", d.str(), "run", "--simulate", "--simulate-toolchain", "--devices", "10", "--lock-dir",
                                   (d.path() / "locks").string(), "--state-dir", (d.path() / "state").string()});
  CHECK(untyped.exit_code == 2);
  CHECK(untyped.err.find("device-type") != std::string::npos);
}

TEST_CASE("shipped definitions: every command runs in pypto's layout with pypto's flags, moe on 2 cards with --ep 2, "
          "the a5 job on an a5 card", "[shipped]") {
  PyptoMain p;
  CommandResult r = p.cli({"run"});
  INFO(r.out << r.err << read_file(p.base.path() / "fake.log"));
  REQUIRE(r.exit_code == 0);
  std::map<std::string, json> scripts;
  int pytests = 0, errors = 0;
  for (const auto& inv : p.invocations()) {
    errors += inv["kind"] == "error";
    pytests += inv["kind"] == "pytest";
    if (inv["kind"] == "script") scripts[inv["script"]] = inv;
  }
  CHECK(errors == 0);
  CHECK(pytests == 12);  // shard A; shard B and 5 direct; dist; a5; the three simulator runs
  // The simulators (system-tests-a5sim) run on the host's CPUs: no card, pypto's own platforms and flags.
  std::vector<std::string> simulated;
  for (const auto& inv : p.invocations())
    if (inv["kind"] == "pytest" && inv["job"] == "system-tests-a5sim") {
      CHECK(inv["task_device"].is_null());
      const std::string argv = inv["argv"].dump();
      CHECK(argv.find("--forked") != std::string::npos);
      simulated.push_back(argv.find("--platform=a2a3sim") != std::string::npos ? "a2a3sim"
                          : argv.find("--platform=a5sim") != std::string::npos  ? "a5sim"
                                                                                 : "?");
    }
  CHECK(simulated == std::vector<std::string>{"a5sim", "a5sim", "a2a3sim"});
  // The two batched shards borrowed their cards through task-submit, from the run's own queue: two batches
  // each, on an a2a3 card (the step's device-type), never on the a5 ones (checked below with every card use).
  std::map<std::string, int> batches;
  for (const auto& inv : p.invocations())
    if (inv["kind"] == "batch") batches[inv["job"]]++;
  CHECK(batches == std::map<std::string, int>{{"system-tests", 2}, {"system-tests-direct", 2}});
  CHECK(scripts.size() == 9);
  const json& moe = scripts.at("models/deepseek_v4_flash_mtp/moe.py");
  CHECK(moe["ep"] == "2");
  std::string cards = moe["task_device"];
  CHECK((cards == "0,1" || cards == "2,3" || cards == "4,5" || cards == "6,7"));
  for (const auto& inv : p.invocations())
    if (inv["kind"] == "pytest" && inv["argv"].dump().find("--platform=a5\"") != std::string::npos)
      CHECK((inv["task_device"] == "8" || inv["task_device"] == "9"));
  // Every a2a3 step says so (device-type: a2a3): on this mixed host none of them got an a5 card (8, 9).
  for (const auto& [name, inv] : scripts) CHECK(inv["platform"] == "a2a3");
  for (const auto& inv : p.invocations()) {
    if (!inv["task_device"].is_string()) continue;
    INFO(inv.dump());
    const bool a5 = inv["job"] == "mixed-kernel-tests-a5";
    for (int card : ids_of(inv["task_device"])) CHECK((a5 ? card >= 8 : card < 8));
  }
}

TEST_CASE("shipped definitions: a host without a5 cards refuses the a5 job at its line", "[shipped]") {
  PyptoMain p;
  p.base.write("host.yml", "devices:\n  ids: [0, 1, 2, 3]\n  type: a2a3\n");
  CommandResult r = p.cli({"plan", "--job", "mixed-kernel-tests-a5"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("jobs/mixed-kernel-tests-a5.yml:11:18: error: step 'Test mixed-kernel system tests (A5, on board)' needs "
                   "cards of type 'a5'; no card of this host has it (types: a2a3) [unknown-device-type]") != std::string::npos);
}
