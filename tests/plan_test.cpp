// Expansion (plan/plan.cpp) through the library and `plan --format json` through the binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "config/project.h"
#include "plan/plan.h"
#include "report/plan_view.h"
#include "test_support.h"

using namespace pto::test;

namespace {

pto::Plan plan_of(const TempDir& d, pto::Diagnostics& diags, std::vector<std::string> jobs = {}) {
  pto::LoadOptions o;
  o.root = d.str();
  pto::Project p = pto::load_project(o, diags);
  return pto::build_plan(p, pto::PlanOptions{jobs, "x86_64"}, diags);
}

const nlohmann::json* find_step(const nlohmann::json& plan, const std::string& job, const std::string& name) {
  for (const auto& j : plan["jobs"])
    if (j["id"] == job)
      for (const auto& s : j["steps"])
        if (s["name"] == name) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("plan --format json of the shipped definitions: pypto-lib's paths, moe on 2 cards with --ep 2", "[plan][shipped]") {
  CommandResult r = run_cli({"plan", "--root", source_dir().string(), "--format", "json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["jobs"][0]["name"] == "toolchain");
  CHECK(j["jobs"][0]["lead"] == true);
  CHECK(j["ptoas_version"] == "v0.57");
  const auto* moe = find_step(j, "pypto-lib-model", "Run pypto-lib DeepSeek-V4-Flash moe example");
  REQUIRE(moe);
  CHECK((*moe)["devices"] == 2);
  CHECK((*moe)["run"].get<std::string>().find("python models/deepseek_v4_flash_mtp/moe.py -p a2a3 -d $TASK_DEVICE --ep 2") !=
        std::string::npos);
  CHECK((*moe)["queue_timeout_minutes"] == 60);  // task-submit --timeout 3600
  CHECK((*moe)["run_timeout_minutes"] == 30);    // task-submit --max-time 1800
  CHECK((*moe)["deduplicated_from"].is_null());
  CHECK((*moe)["key"].get<std::string>().size() == 64);
  for (const char* ex : {"decode_swa", "decode_hca", "decode_csa", "prefill_csa", "prefill_hca", "prefill_swa"}) {
    const auto* s = find_step(j, "pypto-lib-model", std::string("Run pypto-lib DeepSeek-V4-Flash ") + ex + " example");
    REQUIRE(s);
    CHECK((*s)["devices"] == 1);
  }
  for (const char* ex : {"decode_fwd", "prefill_fwd"}) CHECK(find_step(j, "pypto-lib-model", std::string("Run pypto-lib Qwen3-14B ") + ex + " example"));
  const auto* a5 = find_step(j, "mixed-kernel-tests-a5", "Test mixed-kernel system tests (A5, on board)");
  REQUIRE(a5);
  CHECK((*a5)["device_type"] == "a5");
  // Jobs needing the toolchain list the lead job.
  for (const auto& job : j["jobs"])
    if (job["toolchain"] == true) CHECK(job["needs"][0] == "toolchain");
}

TEST_CASE("a step written twice in a job is planned once plus a deduplicated_from entry", "[plan]") {
  TempDir d;
  // The incumbent's copy-paste: a second, byte-identical prefill_csa step, whatever its name.
  write_project(d, {{"m.yml", "name: m\nparallel: true\nsteps:\n"
                              "  - {name: prefill_csa, devices: 1, run: 'python models/prefill_csa.py -d $TASK_DEVICE'}\n"
                              "  - {name: moe, devices: 2, run: 'python models/moe.py -d $TASK_DEVICE --ep 2'}\n"
                              "  - {name: prefill_csa again, devices: 1, run: 'python models/prefill_csa.py -d $TASK_DEVICE'}\n"}});
  CommandResult r = run_cli({"plan", "--root", d.str(), "--format", "json"});
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  const auto& steps = j["jobs"][0]["steps"];
  CHECK(steps[0]["deduplicated_from"].is_null());
  CHECK(steps[2]["deduplicated_from"] == "prefill_csa");
  CHECK(steps[2]["deduplicated_from_index"] == 0);
  CHECK(j["summary"]["deduplicated"] == 1);
  // Text form says so too.
  CommandResult t = run_cli({"plan", "--root", d.str()});
  CHECK(t.out.find("deduplicated: same work as step 1") != std::string::npos);
}

TEST_CASE("plan output is deterministic", "[plan]") {
  CommandResult a = run_cli({"plan", "--root", source_dir().string(), "--format", "json"});
  CommandResult b = run_cli({"plan", "--root", source_dir().string(), "--format", "json"});
  REQUIRE(a.exit_code == 0);
  CHECK(a.out == b.out);
}

TEST_CASE("jobs come in dependency order, selection brings needs along", "[plan]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nneeds: [b]\nsteps:\n  - run: a\n"},
                    {"b.yml", "name: b\nneeds: [c]\nsteps:\n  - run: b\n"},
                    {"c.yml", "name: c\nsteps:\n  - run: c\n"},
                    {"z.yml", "name: z\nsteps:\n  - run: z\n"}});
  pto::Diagnostics diags;
  pto::Plan all = plan_of(d, diags);
  REQUIRE_FALSE(diags.has_errors());
  std::vector<std::string> ids;
  for (const auto& j : all.jobs) ids.push_back(j.id);
  CHECK(ids == std::vector<std::string>{"c", "b", "a", "z"});

  pto::Plan some = plan_of(d, diags, {"b"});
  ids.clear();
  for (const auto& j : some.jobs) ids.push_back(j.id);
  CHECK(ids == std::vector<std::string>{"c", "b"});

  plan_of(d, diags, {"nope"});
  REQUIRE(diags.has_input_errors());
  CHECK(diags.items().back().rule == "unknown-job");
}

TEST_CASE("matrix legs substitute ${{ matrix.x }} into name, run, env and devices", "[plan]") {
  TempDir d;
  write_project(d, {{"t.yml", "name: t\nstrategy:\n  matrix:\n    cards: [1, 2]\n    suite: [ops]\n"
                              "steps:\n  - name: tests on ${{ matrix.cards }}\n    run: pytest ${{ matrix.suite }}\n"
                              "    env: {SUITE: '${{ matrix.suite }}'}\n    devices: ${{ matrix.cards }}\n"}});
  pto::Diagnostics diags;
  pto::Plan plan = plan_of(d, diags);
  REQUIRE_FALSE(diags.has_errors());
  REQUIRE(plan.jobs.size() == 2);
  CHECK(plan.jobs[0].id == "t (1, ops)");
  CHECK(plan.jobs[1].id == "t (2, ops)");
  CHECK(plan.jobs[1].steps[0].name == "tests on 2");
  CHECK(plan.jobs[1].steps[0].run == "pytest ops");
  CHECK(plan.jobs[1].steps[0].env.at("SUITE") == "ops");
  CHECK(plan.jobs[1].steps[0].devices == 2);
}

TEST_CASE("an unknown matrix key in an expression is an error naming it", "[plan]") {
  TempDir d;
  write_project(d, {{"t.yml", "name: t\nstrategy:\n  matrix:\n    os: [a]\nsteps:\n  - run: echo ${{ matrix.o }}\n"}});
  pto::Diagnostics diags;
  plan_of(d, diags);
  REQUIRE(diags.has_input_errors());
  CHECK(diags.items()[0].message.find("the matrix has no key 'o' (keys: os)") != std::string::npos);
  CHECK(diags.items()[0].line == 6);
}

TEST_CASE("the step key ignores names and covers run, env, working-directory, shell, devices", "[plan]") {
  TempDir d;
  write_project(d, {{"j.yml", R"(name: j
steps:
  - {name: one, run: make}
  - {name: two, run: make}
  - {name: three, run: make, env: {A: "1"}}
  - {name: four, run: make, working-directory: sub}
  - {name: five, run: make, shell: sh}
  - {name: six, run: make, devices: 1}
  - {name: seven, run: make, env: {A: "1"}}
)"}});
  pto::Diagnostics diags;
  pto::Plan plan = plan_of(d, diags);
  REQUIRE_FALSE(diags.has_errors());
  const auto& s = plan.jobs[0].steps;
  REQUIRE(s.size() == 7);
  CHECK(s[1].deduplicated_from == 0);
  for (int i : {2, 3, 4, 5}) CHECK_FALSE(s[i].deduplicated_from.has_value());
  CHECK(s[6].deduplicated_from == 2);
  CHECK(s[0].key == s[1].key);
  CHECK(s[0].key != s[2].key);
}

TEST_CASE("dedupe is within a job: the same step in two jobs runs in both", "[plan]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: make\n"}, {"b.yml", "name: b\nsteps:\n  - run: make\n"}});
  pto::Diagnostics diags;
  pto::Plan plan = plan_of(d, diags);
  CHECK(plan.deduplicated_count() == 0);
}

TEST_CASE("expected and timeout minutes come from step, then example, then model", "[plan]") {
  TempDir d;
  write_project(d, {{"m.yml", "name: m\nsteps:\n  - models: [x]\n"}},
                {{"x.yml", "model: X\ndir: d\ncommand: run {example} {args}\ntimeout-minutes: 9\nexpected-minutes: 3\n"
                           "examples:\n  - {name: a, expected-minutes: 0.05}\n  - {name: b, timeout-minutes: 2}\n"}});
  pto::Diagnostics diags;
  pto::Plan plan = plan_of(d, diags);
  REQUIRE_FALSE(diags.has_errors());
  const auto& s = plan.jobs[0].steps;
  CHECK(s[0].expected_minutes == Approx(0.05));
  CHECK(s[0].timeout_minutes == Approx(9));
  CHECK(s[1].expected_minutes == Approx(3));
  CHECK(s[1].timeout_minutes == Approx(2));
  CHECK(s[0].run == "run a");
}
