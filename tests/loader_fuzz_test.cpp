// The loaders never crash or hang on truncated, random or deeply nested input: a few hundred mutated inputs,
// from a fixed seed so a failure reproduces, fed to every loader and to the planner.
#include <catch2/catch.hpp>

#include <random>

#include "lint/gha_workflow.h"
#include "config/project.h"
#include "config/versions_env.h"
#include "lint/lint.h"
#include "plan/plan.h"
#include "test_support.h"

using namespace pto::test;

namespace {

std::string mutate(const std::string& seed, std::mt19937& rng) {
  std::string s = seed;
  std::uniform_int_distribution<int> kind(0, 7);
  auto pos = [&](std::size_t n) { return n ? std::uniform_int_distribution<std::size_t>(0, n - 1)(rng) : 0; };
  const std::string specials = ":-[]{}#&*!|>'\"%@`,?\n\t ${}";
  switch (kind(rng)) {
    case 0: s.resize(pos(s.size() + 1)); break;  // truncate
    case 1:
      for (int i = 0; i < 8 && !s.empty(); ++i) s[pos(s.size())] = static_cast<char>(rng());  // random bytes
      break;
    case 2:
      for (int i = 0; i < 8; ++i) s.insert(pos(s.size() + 1), 1, specials[pos(specials.size())]);
      break;
    case 3: {  // duplicate a slice (duplicate keys, repeated steps)
      std::size_t a = pos(s.size() + 1), b = pos(s.size() + 1);
      if (a > b) std::swap(a, b);
      s.insert(b, s.substr(a, b - a));
      break;
    }
    case 4: {  // deeply nested flow collections
      std::size_t depth = 500 + pos(5000);
      s = "steps: " + std::string(depth, '[') + "x" + std::string(pos(2) ? depth : depth / 2, ']') + "\n";
      break;
    }
    case 5: {  // deeply nested block mappings
      std::string t;
      std::size_t depth = 100 + pos(3000);
      for (std::size_t i = 0; i < depth; ++i) t += std::string(i % 200, ' ') + "k:\n";
      s = t;
      break;
    }
    case 6: {  // pure noise
      s.assign(pos(2000), '\0');
      for (auto& c : s) c = static_cast<char>(rng());
      break;
    }
    default: {  // swap two lines' indentation
      auto nl = s.find('\n', pos(s.size() + 1));
      if (nl != std::string::npos) s.insert(nl + 1, std::string(pos(7), ' '));
      break;
    }
  }
  return s;
}

// Every finding names a rule, says something, and is attributed to a file (never an empty place).
void check_diagnostics(const pto::Diagnostics& d) {
  for (const auto& x : d.items()) {
    CHECK_FALSE(x.rule.empty());
    CHECK_FALSE(x.message.empty());
    CHECK_FALSE(x.file.empty());
  }
}

}  // namespace

TEST_CASE("loaders survive a few hundred mutated inputs", "[fuzz]") {
  const auto src = source_dir();
  std::vector<std::pair<std::string, std::string>> seeds = {
      {"job", read_file(src / "jobs/pypto-lib-model.yml")},
      {"job", read_file(src / "jobs/system-tests.yml")},
      {"model", read_file(src / "models/deepseek-v4-flash.yml")},
      {"toolchain", read_file(src / "toolchain/ptoas.yml")},
      {"versions", read_file(src / "toolchain/versions.env")},
      {"runner", "devices:\n  ids: [0, 1, 2, 3]\n  groups: [[0, 1], [2, 3]]\nhealth: {drain-after: 2}\n"},
      {"workflow", read_file(src / "tests/fixtures/workflows/ci-incumbent.yml").substr(0, 20000)},
  };
  std::mt19937 rng(20261129);
  TempDir dir;
  int runs = 0, rejected = 0;
  for (int round = 0; round < 60; ++round) {
    for (const auto& [kind, seed] : seeds) {
      std::string input = mutate(seed, rng);
      auto path = dir.write("in.yml", input).string();
      pto::Diagnostics d;
      REQUIRE_NOTHROW([&] {
        if (kind == "job") pto::load_job_file(path, "in.yml", "in", d);
        else if (kind == "model") pto::load_model_file(path, "in.yml", "in", d);
        else if (kind == "toolchain") pto::load_toolchain_config(path, "in.yml", d);
        else if (kind == "versions") pto::parse_versions_env(input, "in.env", d);
        else if (kind == "runner") pto::load_runner_config(path, "in.yml", d);
        else {
          auto wf = pto::load_workflow(path, "in.yml", d);
          pto::lint_duplicate_steps(wf, d);
          pto::lint_inline_literals(path, "in.yml", d);
        }
      }());
      check_diagnostics(d);
      ++runs;
      rejected += d.has_errors();
    }
  }
  CHECK(runs == 420);
  CHECK(rejected > 100);  // the mutations really do produce bad input
}

TEST_CASE("the planner survives a project of mutated job files", "[fuzz]") {
  const auto src = source_dir();
  std::mt19937 rng(7);
  std::string seed = read_file(src / "jobs/pypto-lib-model.yml");
  std::string model = read_file(src / "models/deepseek-v4-flash.yml");
  for (int round = 0; round < 40; ++round) {
    TempDir d;
    write_project(d, {{"a.yml", mutate(seed, rng)}, {"b.yml", mutate(read_file(src / "jobs/system-tests.yml"), rng)},
                      {"pypto-lib-checkout.yml", "name: pypto-lib-checkout\nsteps:\n  - run: true\n"}},
                  {{"deepseek-v4-flash.yml", mutate(model, rng)}, {"qwen3-14b.yml", model}});
    pto::Diagnostics diags;
    pto::LoadOptions o;
    o.root = d.str();
    REQUIRE_NOTHROW([&] {
      pto::Project p = pto::load_project(o, diags);
      pto::Plan plan = pto::build_plan(p, {}, diags);
      pto::lint_project_files(p, plan, diags);
    }());
    check_diagnostics(diags);
  }
}
