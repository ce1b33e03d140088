// One fixture per class of load error: each checked through the real CLI for its exact FILE:LINE:COL, rule and
// exit code (2: the input files are invalid).
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include "test_support.h"

using namespace pto::test;

namespace {

struct Expect {
  std::string file;
  int line, col;
  std::string rule;
  std::string message_part;
};

void check_lint(const TempDir& dir, const Expect& e, int exit_code = 2, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"lint", "--root", dir.str(), "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult r = run_cli(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == exit_code);
  auto j = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& f : j["findings"])
    if (f["file"] == e.file && f["line"] == e.line && f["col"] == e.col && f["rule"] == e.rule &&
        f["message"].get<std::string>().find(e.message_part) != std::string::npos)
      found = true;
  CHECK(found);
  // The text form carries the same place, in the FILE:LINE:COL: error: MESSAGE [RULE] shape.
  std::vector<std::string> text_args = {"lint", "--root", dir.str()};
  text_args.insert(text_args.end(), extra.begin(), extra.end());
  CommandResult t = run_cli(text_args);
  CHECK(t.out.find(e.file + ":" + std::to_string(e.line) + ":" + std::to_string(e.col) + ": error: ") !=
        std::string::npos);
  CHECK(t.out.find("[" + e.rule + "]") != std::string::npos);
}

const char* kOkJob = "name: build\nsteps:\n  - run: make\n";

}  // namespace

TEST_CASE("malformed YAML is reported at the parser's position", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: [unclosed\n"}});
  check_lint(d, {"jobs/a.yml", 4, 1, "yaml-syntax", "invalid YAML"});
}

TEST_CASE("a wrong type names the key and the expected form", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: make\n    timeout-minutes: soon\n"}});
  check_lint(d, {"jobs/a.yml", 4, 22, "wrong-type", "'timeout-minutes' expects a number, got 'soon'"});
}

TEST_CASE("an unknown key suggests the nearest known key", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: make\n    timeout-minute: 5\n"}});
  check_lint(d, {"jobs/a.yml", 4, 5, "unknown-key", "did you mean 'timeout-minutes'?"});
}

TEST_CASE("a missing required key is reported on its mapping", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", kOkJob}}, {{"m.yml", "model: M\ndir: models/m\nexamples:\n  - {name: x}\n"}});
  check_lint(d, {"models/m.yml", 1, 1, "missing-key", "required key 'command' is missing"});
}

TEST_CASE("a step with neither run nor models is reported", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - name: nothing\n"}});
  check_lint(d, {"jobs/a.yml", 3, 5, "missing-key", "needs 'run'"});
}

TEST_CASE("a sha256 that is not 64 lowercase hex is rejected", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", kOkJob}});
  d.write("toolchain/versions.env",
          "PTOAS_VERSION=v0.52\nPTOAS_SHA256_AARCH64=A64E7EE9753DDE1BCA0D4C71C0CB6950B4D1F8BDF1C39580B3AF3D442BC3FE8B\n"
          "PTOAS_SHA256_X86_64=d24b81565ec3d3ead4b05d18d62e55d6e5dd56c7cd8dd243f041a6ed14024f75\n");
  check_lint(d, {"toolchain/versions.env", 2, 22, "bad-value", "64 lowercase hex"});
}

TEST_CASE("a bad version is rejected", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", kOkJob}});
  d.write("toolchain/versions.env", "PTOAS_VERSION=0.52\n" + valid_versions_env().substr(valid_versions_env().find("PTOAS_SHA")));
  check_lint(d, {"toolchain/versions.env", 1, 15, "bad-value", "must look like v0.52"});
}

TEST_CASE("KEY = value with spaces is rejected in versions.env", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", kOkJob}});
  d.write("toolchain/versions.env", "# pin\nPTOAS_VERSION = v0.52\n" +
                                        valid_versions_env().substr(valid_versions_env().find("PTOAS_SHA")));
  check_lint(d, {"toolchain/versions.env", 2, 14, "bad-value", "space before '='"});
}

TEST_CASE("a duplicated key in versions.env is rejected", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", kOkJob}});
  d.write("toolchain/versions.env", valid_versions_env() + "PTOAS_VERSION=v0.53\n");
  check_lint(d, {"toolchain/versions.env", 5, 1, "duplicate-key", "set twice (first on line 2)"});
}

TEST_CASE("needs naming no job is rejected with a suggestion", "[load]") {
  TempDir d;
  write_project(d, {{"build.yml", kOkJob}, {"test.yml", "name: test\nneeds: [biuld]\nsteps:\n  - run: make test\n"}});
  check_lint(d, {"jobs/test.yml", 2, 9, "unknown-need", "did you mean 'build'?"});
}

TEST_CASE("a cycle is rejected and printed", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nneeds: [c]\nsteps:\n  - run: a\n"},
                    {"b.yml", "name: b\nneeds: [a]\nsteps:\n  - run: b\n"},
                    {"c.yml", "name: c\nneeds: b\nsteps:\n  - run: c\n"}});
  check_lint(d, {"jobs/a.yml", 2, 9, "cycle", "a -> c -> b -> a"});
}

TEST_CASE("devices negative, not an integer, or beyond the pool are rejected", "[load]") {
  SECTION("negative") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: x\n    devices: -1\n"}});
    check_lint(d, {"jobs/a.yml", 4, 14, "bad-value", "'devices' must be between 0"});
  }
  SECTION("not an integer") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: x\n    devices: 1.5\n"}});
    check_lint(d, {"jobs/a.yml", 4, 14, "wrong-type", "'devices' expects an integer"});
  }
  SECTION("larger than the pool") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: x\n    devices: 4\n"}});
    check_lint(d, {"jobs/a.yml", 4, 14, "devices-exceed-pool", "the pool has 2"}, 2, {"--devices", "2"});
  }
  SECTION("larger than any device group") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: x\n    devices: 3\n"}});
    check_lint(d, {"jobs/a.yml", 4, 14, "devices-exceed-pool", "largest group has 2"}, 2,
               {"--devices", "0-3", "--device-groups", "0,1;2,3"});
  }
  SECTION("a model example larger than the pool points at the example") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\nsteps:\n  - models: [m]\n"}},
                  {{"m.yml", "model: M\ndir: d\ncommand: run {example}\nexamples:\n  - {name: big, devices: 16}\n"}});
    check_lint(d, {"models/m.yml", 5, 5, "devices-exceed-pool", "needs 16 cards"});
  }
  SECTION("a matrix value that is not a number") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\nstrategy:\n  matrix:\n    n: [1, two]\nsteps:\n  - run: x\n"
                                "    devices: ${{ matrix.n }}\n"}});
    check_lint(d, {"jobs/a.yml", 7, 14, "bad-value", "got 'two'"});
  }
}

TEST_CASE("a models entry naming no model file is rejected", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - models: [qwen3-14b, deepseek-v4-flsh]\n"}},
                {{"qwen3-14b.yml", "model: Q\ndir: d\ncommand: run {example}\nexamples: [{name: decode}]\n"},
                 {"deepseek-v4-flash.yml", "model: D\ndir: d\ncommand: run {example}\nexamples: [{name: moe}]\n"}});
  check_lint(d, {"jobs/a.yml", 3, 25, "unknown-model", "did you mean 'deepseek-v4-flash'?"});
}

TEST_CASE("a matrix over 256 legs is rejected before it is built", "[load]") {
  TempDir d;
  std::string axis = "[";
  for (int i = 0; i < 20; ++i) axis += (i ? ", " : "") + std::to_string(i);
  axis += "]";
  write_project(d, {{"a.yml", "name: a\nstrategy:\n  matrix:\n    x: " + axis + "\n    y: " + axis +
                                  "\nsteps:\n  - run: echo ${{ matrix.x }}\n"}});
  check_lint(d, {"jobs/a.yml", 4, 5, "matrix-too-large", "limit is 256"});
}

TEST_CASE("every problem of a file is reported at once", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nneedz: [b]\nsteps:\n  - run: x\n    devices: many\n    contine-on-error: true\n"}});
  CommandResult r = run_cli({"lint", "--root", d.str(), "--format", "json"});
  REQUIRE(r.exit_code == 2);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["findings"].size() == 3);
}

TEST_CASE("plan refuses invalid definitions with exit 2 and the same located message", "[load]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - run: make\n    timeout-minute: 5\n"}});
  CommandResult r = run_cli({"plan", "--root", d.str()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("jobs/a.yml:4:5: error: unknown key 'timeout-minute' in step; did you mean 'timeout-minutes'? "
                   "[unknown-key]") != std::string::npos);
  CHECK(r.out.empty());
}

TEST_CASE("a missing versions.env is an unreadable input", "[load]") {
  TempDir d;
  d.write("jobs/a.yml", kOkJob);
  CommandResult r = run_cli({"lint", "--root", d.str()});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("toolchain/versions.env: error: cannot read toolchain pin file: ") != std::string::npos);
  CHECK(r.out.find("[unreadable]") != std::string::npos);
}

TEST_CASE("a versions.env that is a FIFO or a directory is refused at once with what it is", "[load]") {
  for (const char* kind : {"fifo", "dir"}) {
    TempDir d;
    d.write("jobs/a.yml", kOkJob);
    fs::create_directories(d.path() / "toolchain");
    const std::string pin = (d.path() / "toolchain/versions.env").string();
    if (std::string(kind) == "fifo") REQUIRE(::mkfifo(pin.c_str(), 0644) == 0);
    else fs::create_directories(pin);
    CommandResult r = run_cli({"lint", "--root", d.str()});  // a FIFO used to block lint (and serve) forever
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(std::string("cannot read toolchain pin file: ") + pin + (std::string(kind) == "fifo" ? " is a FIFO" : " is a directory")) !=
          std::string::npos);
  }
}
