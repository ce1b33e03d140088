#pragma once
// A stand-in of pypto's main branch (tests/fixtures/pypto-main: every path where pypto has it, fake host tools
// that check flags as pypto's conftest and pypto-lib's scripts do, and log each call with its cards, node and
// times), with the shipped jobs/, models/ and toolchain/ and a pin set up from a local wheel. Used by the
// shipped-definition tests (local cards) and the Slurm tests.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.h"

namespace pto::test {

struct PyptoMain {
  TempDir base;
  fs::path tree() const { return base.path() / "pypto"; }
  PyptoMain() {
    REQUIRE(sh("python3 " + (source_dir() / "tests/fixtures/pypto-main/make_tree.py").string() + " " + base.str()) == 0);
    for (const char* d : {"jobs", "models", "toolchain"}) fs::copy(source_dir() / d, tree() / d, fs::copy_options::recursive);
    REQUIRE(sh((source_dir() / "scripts/make-local-pin.sh").string() + " " + tree().string() + " >/dev/null") == 0);
    // The harness's `task-submit` (pypto's --execute-via-task-submit) is the drop-in, found on PATH.
    fs::create_symlink(PTO_RUNNER_BIN, base.path() / "bin" / "task-submit");
    base.write("host.yml", "devices:\n  ids: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n  groups: [[0, 1], [2, 3], [4, 5], [6, 7]]\n"
                           "  types: {a2a3: [0, 1, 2, 3, 4, 5, 6, 7], a5: [8, 9]}\n  lock-dir: " + (base.path() / "locks").string() +
                           "\nstate-dir: " + (base.path() / "state").string() + "\ncache-dir: " + (base.path() / "cache").string() +
                           "\ntoolchain-mirror: " + (tree() / "mirror").string() + "\n");
  }
  std::map<std::string, std::string> extra_env;  // more for the runner and its steps (SLURM_CONF, FAKE_HOLD)
  std::map<std::string, std::string> env() const {
    std::map<std::string, std::string> e = extra_env;
    e.insert({{"PATH", (base.path() / "bin").string() + ":" + std::getenv("PATH")},
            {"CI_CACHE_ROOT", (base.path() / "ci-cache").string()},
            {"CANN_ROOT", (base.path() / "cann").string()},
            {"PYPTO_LIB_REPO", (base.path() / "pypto-lib-origin").string()},
            {"FAKE_LOG", (base.path() / "fake.log").string()}});
    return e;
  }
  CommandResult cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--root", tree().string(), "--config", (base.path() / "host.yml").string()});
    return run_cli(args, env());
  }
  std::vector<nlohmann::json> invocations() const {
    std::vector<nlohmann::json> out;
    std::istringstream in(read_file(base.path() / "fake.log"));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

}  // namespace pto::test
