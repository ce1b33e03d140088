// `pto-runner import --workflow` and `lint --workflow --against`: a workflow in pypto's style (task-submit
// wrapped device steps, pypto's checkout layout) becomes definitions that plan exactly as hand-written ones,
// what cannot be carried over is listed at its line, and drift between the two is found.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <regex>

#include <yaml-cpp/yaml.h>

#include "test_support.h"

using namespace pto::test;
using nlohmann::json;

namespace {

std::string model_step(const std::string& model, const std::string& dir, const std::string& example, const std::string& extra_flags,
                       const std::string& args) {
  return "      - name: Run pypto-lib " + model + " " + example + " example\n"
         "        env:\n          PYTHONPATH: ${{ github.workspace }}/pypto-lib\n"
         "        run: |\n          source activate.sh\n"
         "          task-submit --device \"$DEVICE_ID\"" + extra_flags + " --timeout 3600 --max-time 1800 --run \"source "
         "$GITHUB_WORKSPACE/lib-checkout/activate.sh && cd $GITHUB_WORKSPACE/pypto-lib && python " + dir + "/" + example +
         ".py -p a2a3 -d \\$TASK_DEVICE" + args + "\"\n";
}

std::string workflow(const std::string& moe_flags = " --device-num 2", const std::string& extra_step = "") {
  return "name: ci\non: [pull_request]\njobs:\n"
         "  system-tests-direct:\n"
         "    runs-on: [self-hosted, linux, arm64, npu]\n"
         "    defaults:\n      run:\n        working-directory: st-direct-checkout\n"
         "    steps:\n"
         "      - uses: actions/checkout@v4\n        with: {path: st-direct-checkout}\n"
         "      - name: Test direct-device\n        timeout-minutes: 30\n        run: |\n"
         "          source activate.sh\n"
         "          echo \"[device] DEVICE_ID=$DEVICE_ID\"\n"
         "          test -n \"$DEVICE_ID\" || { echo \"DEVICE_ID is empty\"; exit 1; }\n"
         "          task-submit --device \"$DEVICE_ID\" --timeout 3600 --max-time 1800 \\\n"
         "            --run \"cd $GITHUB_WORKSPACE/st-direct-checkout && source activate.sh && python -m pytest \\\n"
         "              tests/st -v -m 'not device_batch' --device=\\$TASK_DEVICE --platform=a2a3\"\n"
         "  dist-system-tests:\n"
         "    runs-on: [self-hosted, linux, arm64, npu]\n"
         "    needs: [system-tests-direct]\n"
         "    container: ghcr.io/hw-native-sys/pypto/github-ci:latest\n"
         "    defaults: {run: {working-directory: dist-checkout}}\n"
         "    steps:\n"
         "      - name: Test distributed system tests\n        timeout-minutes: 45\n        run: |\n"
         "          source activate.sh\n"
         "          task-submit --device \"$DEVICE_ID\" --device-num 2 --timeout 3600 --max-time 1800 --run \"cd "
         "$GITHUB_WORKSPACE/dist-checkout && source activate.sh && python -m pytest tests/st/distributed -v --device=\\$TASK_DEVICE\"\n"
         "  pypto-lib-model:\n"
         "    runs-on: [self-hosted, linux, arm64, npu]\n"
         "    services:\n      cache: {image: redis}\n"
         "    defaults: {run: {working-directory: lib-checkout}}\n"
         "    steps:\n" +
         model_step("Qwen3-14B", "models/qwen3_14b", "decode_fwd", "", "") +
         model_step("Qwen3-14B", "models/qwen3_14b", "prefill_fwd", "", "") +
         model_step("DeepSeek-V4-Flash", "models/deepseek_v4_flash_mtp", "decode_swa", "", "") +
         model_step("DeepSeek-V4-Flash", "models/deepseek_v4_flash_mtp", "moe", moe_flags, " --ep 2") + extra_step;
}

// What a maintainer would write for that workflow by hand.
void hand_written(const TempDir& d) {
  write_project(d, {{"system-tests-direct.yml",
                     "name: system-tests-direct\nsteps:\n  - name: Test direct-device\n    devices: 1\n    timeout-minutes: 30\n"
                     "    queue-timeout-minutes: 60\n    run-timeout-minutes: 30\n    run: |\n      source activate.sh\n"
                     "      source activate.sh && python -m pytest tests/st -v -m 'not device_batch' --device=$TASK_DEVICE --platform=a2a3\n"},
                    {"dist-system-tests.yml",
                     "name: dist-system-tests\nneeds: [system-tests-direct]\nsteps:\n  - name: Test distributed system tests\n"
                     "    devices: 2\n    timeout-minutes: 45\n    queue-timeout-minutes: 60\n    run-timeout-minutes: 30\n"
                     "    run: |\n      source activate.sh\n      source activate.sh && python -m pytest tests/st/distributed -v --device=$TASK_DEVICE\n"},
                    {"pypto-lib-model.yml",
                     "name: pypto-lib-model\nparallel: true\nsteps:\n  - name: Run pypto-lib {model} {example} example\n"
                     "    models: [qwen3-14b, deepseek-v4-flash]\n"}},
                {{"qwen3-14b.yml", "model: Qwen3-14B\ndir: models/qwen3_14b\ncommand: |-\n  export PYTHONPATH=\"$(realpath -m -- ../pypto-lib)\"\n  source activate.sh\n"
                                   "  source ./activate.sh && cd ../pypto-lib && python {dir}/{example}.py -p a2a3 -d $TASK_DEVICE {args}\n"
                                   "queue-timeout-minutes: 60\nrun-timeout-minutes: 30\nexamples:\n  - {name: decode_fwd}\n  - {name: prefill_fwd}\n"},
                 {"deepseek-v4-flash.yml", "model: DeepSeek-V4-Flash\ndir: models/deepseek_v4_flash_mtp\ncommand: |-\n"
                                           "  export PYTHONPATH=\"$(realpath -m -- ../pypto-lib)\"\n  source activate.sh\n"
                                           "  source ./activate.sh && cd ../pypto-lib && python {dir}/{example}.py -p a2a3 -d $TASK_DEVICE {args}\n"
                                           "queue-timeout-minutes: 60\nrun-timeout-minutes: 30\nexamples:\n  - {name: decode_swa}\n"
                                           "  - {name: moe, devices: 2, args: --ep 2}\n"}});
}

// What the plan says a run does: jobs, needs, and per step its name, command (blanks collapsed), cards, bounds.
json essence(const std::string& root) {
  CommandResult r = run_cli({"plan", "--root", root, "--format", "json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json plan = json::parse(r.out), out = json::array();
  for (const auto& j : plan["jobs"]) {
    json steps = json::array();
    for (const auto& s : j["steps"])
      steps.push_back({s["name"], std::regex_replace(s["run"].get<std::string>(), std::regex("\\s+"), " "), s["devices"],
                       s["timeout_minutes"], s["queue_timeout_minutes"], s["run_timeout_minutes"]});
    out.push_back({j["name"], j["needs"], j["parallel"], steps});
  }
  return out;
}

}  // namespace

TEST_CASE("import: a pypto-style workflow plans as the hand-written definitions, the rest is listed at its line", "[import]") {
  TempDir wf, imported, expected;
  wf.write("ci.yml", workflow());
  imported.write("toolchain/versions.env", valid_versions_env());
  CommandResult r = run_cli({"import", "--workflow", (wf.path() / "ci.yml").string(), "--out", imported.str()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(imported.path() / "models/qwen3-14b.yml"));
  CHECK(fs::exists(imported.path() / "models/deepseek-v4-flash.yml"));
  hand_written(expected);
  CHECK(essence(imported.str()) == essence(expected.str()));
  const std::string f = (wf.path() / "ci.yml").string();
  CHECK(r.out.find(f + ":10:15: warning: job 'system-tests-direct': uses: actions/checkout@v4 (not needed: a run is of one "
                       "commit, in its own worktree) [not-imported]") != std::string::npos);
  CHECK(r.out.find(f + ":24:16: warning: job 'dist-system-tests': container: has no equivalent in pto-runner") != std::string::npos);
  CHECK(r.out.find(f + ":35:7: warning: job 'pypto-lib-model': services: has no equivalent in pto-runner") != std::string::npos);
  // pypto's PYTHONPATH (${{ github.workspace }}/pypto-lib) is an absolute path made in the command, not dropped.
  CHECK(r.out.find("PYTHONPATH") == std::string::npos);
  // Nothing is overwritten without --force.
  CommandResult again = run_cli({"import", "--workflow", f, "--out", imported.str()});
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("exists; nothing written") != std::string::npos);
}

TEST_CASE("import: pypto's wiring (the toolchain job, CPU jobs, the docs gate, a5 runners, the harness's card) becomes "
          "pto-runner's and the result lints clean", "[import]") {
  TempDir wf, out;
  const std::string text =
      "name: ci\non: [pull_request]\njobs:\n"
      "  changes:\n    runs-on: ubuntu-latest\n    outputs: {docs_only: '${{ steps.f.outputs.docs_only }}'}\n"
      "    steps:\n      - id: f\n        run: echo docs_only=false >> \"$GITHUB_OUTPUT\"\n"
      "  toolchain:\n    runs-on: ubuntu-latest\n    outputs: {ptoas_version: '${{ steps.v.outputs.ptoas_version }}'}\n"
      "    steps:\n      - id: v\n        run: echo ptoas_version=v0.57 >> \"$GITHUB_OUTPUT\"\n"
      "  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make lint\n"
      "  system-tests:\n    needs: [changes, toolchain, lint]\n    if: needs.changes.outputs.docs_only != 'true'\n"
      "    runs-on: [self-hosted, npu]\n    env:\n      PTOAS_VERSION: ${{ needs.toolchain.outputs.ptoas_version }}\n"
      "      PTO_HOME: ${{ github.workspace }}/home\n      BAD-NAME: ${{ github.workspace }}/x\n"
      "    steps:\n      - uses: actions/cache@v4\n        id: cache\n        with: {path: x, key: y}\n"
      "      - name: Shard A\n        if: steps.cache.outputs.cache-hit != 'true'\n        env: {PTO_HOME: /opt/home}\n        run: |\n"
      "          echo \"[device] DEVICE_ID=$DEVICE_ID\"\n          test -n \"$DEVICE_ID\" || exit 1\n"
      "          echo \"ASCEND_DEVICE_ID=0\" >> env.sh\n          [ -n \"$DEVICE_ID\" ] || {\n            exit 1\n          }\n"
      "          python -m pytest tests/st --execute-via-task-submit --task-submit-device=\"$DEVICE_ID\"\n"
      "  a5:\n    needs: [toolchain]\n    runs-on: [self-hosted, npu-a5]\n    steps:\n"
      "      - name: On board\n        run: task-submit --device \"$DEVICE_ID\" --max-time 600 --run \"pytest x --device=\\$TASK_DEVICE\"\n";
  wf.write("ci.yml", text);
  out.write("toolchain/versions.env", valid_versions_env());
  out.write("toolchain/ptoas.yml", read_file(source_dir() / "toolchain/ptoas.yml"));
  const std::string f = (wf.path() / "ci.yml").string();
  CommandResult r = run_cli({"import", "--workflow", f, "--out", out.str()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Only the NPU jobs; the others stay in Actions, each said once at its line.
  CHECK(fs::exists(out.path() / "jobs/system-tests.yml"));
  CHECK(fs::exists(out.path() / "jobs/a5.yml"));
  for (const char* left : {"changes", "toolchain", "lint"}) {
    CHECK_FALSE(fs::exists(out.path() / "jobs" / (std::string(left) + ".yml")));
    CHECK(r.out.find("job '" + std::string(left) + "' stays in GitHub Actions") != std::string::npos);
  }
  const std::string st = read_file(out.path() / "jobs/system-tests.yml"), a5 = read_file(out.path() / "jobs/a5.yml");
  CHECK(st.find("toolchain: ptoas") != std::string::npos);   // the toolchain job is the lead job
  CHECK(st.find("needs") == std::string::npos);              // changes and lint are left to Actions
  CHECK(st.find("docs_only") == std::string::npos);          // the docs gate decides whether to submit
  CHECK(st.find("PTOAS_VERSION") == std::string::npos);      // the lead job sets the pin's environment
  CHECK(st.find("cache-hit") == std::string::npos);          // the action it read is gone: the step always runs
  CHECK(st.find("[device] DEVICE_ID") == std::string::npos);  // the runner's card is the queue's now
  CHECK(st.find("test -n") == std::string::npos);
  CHECK(st.find("echo \"ASCEND_DEVICE_ID=0\" >> env.sh") != std::string::npos);  // not a check of the runner's card
  CHECK(st.find("[ -n \"$DEVICE_ID\" ] || {") != std::string::npos);          // a block over lines is kept whole
  CHECK(st.find("PTO_HOME: \"/opt/home\"") != std::string::npos);            // the step's value wins over the job's
  CHECK(st.find("realpath -m -- ../home") == std::string::npos);
  CHECK(r.out.find("env BAD-NAME: not a shell variable name") != std::string::npos);
  CHECK(st.find("BAD-NAME") == std::string::npos);
  CHECK(st.find("--task-submit-device=auto") != std::string::npos);
  CHECK(a5.find("device-type: a5") != std::string::npos);    // runs-on npu-a5
  CHECK(r.out.find(f + ":21:13: warning: job 'system-tests': needs: changes stays in GitHub Actions") != std::string::npos);
  CHECK(r.out.find(f + ":22:9: warning: job 'system-tests': if: needs.changes.outputs.docs_only != 'true' reads job "
                       "'changes', which stays in GitHub Actions") != std::string::npos);
  CommandResult lint = run_cli({"lint", "--root", out.str(), "--strict"});
  INFO(lint.out << lint.err);
  CHECK(lint.exit_code == 0);
}

TEST_CASE("lint --workflow --against: each drifted field of a device step is named at the workflow's line", "[import]") {
  TempDir wf, defs;
  hand_written(defs);
  wf.write("same.yml", workflow());
  const std::string same = (wf.path() / "same.yml").string();
  CommandResult clean = run_cli({"lint", "--workflow", same, "--against", defs.str()});
  INFO(clean.out);
  CHECK(clean.out.find("[drift]") == std::string::npos);
  // Drift, each kind once: moe on 1 card, a new example, dist's --max-time, direct-device's platform flag,
  // an NPU job with no definition. Not drift: a model step renamed (same program line), a CPU job (it stays
  // in GitHub Actions).
  std::string text = workflow(" --device-num 1", model_step("DeepSeek-V4-Flash", "models/deepseek_v4_flash_mtp", "prefill_csa", "", ""));
  auto replace = [&](const std::string& from, const std::string& to) {
    auto p = text.find(from);
    REQUIRE(p != std::string::npos);
    text.replace(p, from.size(), to);
  };
  replace("--max-time 1800 --run \"cd $GITHUB_WORKSPACE/dist-checkout", "--max-time 600 --run \"cd $GITHUB_WORKSPACE/dist-checkout");
  replace("--device=\\$TASK_DEVICE --platform=a2a3\"", "--device=\\$TASK_DEVICE --platform=a5\"");
  replace("name: Run pypto-lib Qwen3-14B decode_fwd example", "name: Run pypto-lib Qwen3-14B decode example");
  text += "  docs:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make docs\n"
          "  npu-extra:\n    runs-on: [self-hosted, npu]\n    steps:\n      - run: python -m pytest tests/extra\n";
  wf.write("drifted.yml", text);
  const std::string drifted = (wf.path() / "drifted.yml").string();
  auto line_of = [&](const std::string& needle) {
    auto p = text.find(needle);
    REQUIRE(p != std::string::npos);
    return std::to_string(std::count(text.begin(), text.begin() + static_cast<long>(p), '\n') + 1);
  };
  CommandResult r = run_cli({"lint", "--workflow", drifted, "--against", defs.str()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find(drifted + ":" + line_of("name: Run pypto-lib DeepSeek-V4-Flash moe") + ":9: error: step 'Run pypto-lib "
                   "DeepSeek-V4-Flash moe example' of job 'pypto-lib-model': cards (task-submit --device-num) is 1 in the workflow, "
                   "2 at models/deepseek-v4-flash.yml:11:5 [drift]") != std::string::npos);
  CHECK(r.out.find(drifted + ":" + line_of("name: Run pypto-lib DeepSeek-V4-Flash prefill_csa") + ":9: error: step 'Run pypto-lib "
                   "DeepSeek-V4-Flash prefill_csa example' of job 'pypto-lib-model' runs on cards through task-submit; no step of "
                   "the definitions runs it [drift]") != std::string::npos);
  CHECK(r.out.find(drifted + ":" + line_of("name: Test distributed") + ":9: error: step 'Test distributed system tests' of job "
                   "'dist-system-tests': the run's limit (task-submit --max-time, run-timeout-minutes) is 10 min in the workflow, "
                   "30 min at jobs/dist-system-tests.yml:4:5 [drift]") != std::string::npos);
  CHECK(r.out.find(drifted + ":" + line_of("name: Test direct-device") + ":9: error: step 'Test direct-device' of job "
                   "'system-tests-direct': the command is '... --platform=a5' in the workflow, '... --platform=a2a3' at "
                   "jobs/system-tests-direct.yml:3:5 [drift]") != std::string::npos);
  CHECK(r.out.find(drifted + ":" + line_of("  npu-extra:") + ":3: error: NPU job 'npu-extra' has no definition "
                   "(jobs/npu-extra.yml) [drift]") != std::string::npos);
  CHECK(r.out.find("decode example") == std::string::npos);
  CHECK(r.out.find("'docs'") == std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 5);  // those five, nothing else
}

namespace {

// A repository in pypto's style: an NPU job set up by a local composite action whose `unset-ring` input
// writes an unset into activate.sh, an a5 job, a job env the definitions do not have (a deliberate difference).
void pypto_style_repo(const TempDir& repo, const std::string& unset_ring = ", unset-ring: 'true'", const std::string& a5_label = "npu-a5",
                      const std::string& action_extra = "") {
  repo.write(".github/actions/setup/action.yml",
             "name: setup\ninputs:\n  checkout-path: {required: true}\n  unset-ring: {default: 'false'}\nruns:\n  using: composite\n  steps:\n"
             "    - name: Write activate.sh\n      shell: bash\n      env:\n        UNSET_RING: ${{ inputs.unset-ring }}\n      run: |\n"
             "        echo 'export PATH=$PWD/venv/bin:$PATH' > activate.sh\n" + action_extra +
             "        if [ \"$UNSET_RING\" = \"true\" ]; then\n"
             "          printf '%s\\n' 'unset PTO2_RING_HEAP PTO2_RING_TASK_WINDOW' >> activate.sh\n        fi\n");
  repo.write(".github/workflows/ci.yml",
             "name: ci\non: [pull_request]\njobs:\n"
             "  dist-system-tests:\n    runs-on: [self-hosted, linux, arm64, npu]\n    env:\n      CCACHE_MAXSIZE: 30G\n    steps:\n"
             "      - uses: ./.github/actions/setup\n        with: {checkout-path: dist-checkout" + unset_ring + "}\n"
             "      - name: Test distributed system tests\n        timeout-minutes: 45\n        run: |\n          source activate.sh\n"
             "          task-submit --device-num 2 --timeout 3600 --max-time 1800 --run \"python -m pytest tests/st/distributed --device=\\$TASK_DEVICE\"\n"
             "  mixed-kernel-tests-a5:\n    runs-on: [self-hosted, linux, arm64, " + a5_label + "]\n    steps:\n"
             "      - name: Test on board\n        timeout-minutes: 30\n"
             "        run: task-submit --device-num 1 --timeout 3600 --max-time 1200 --run \"python -m pytest tests/st/a5 --device=\\$TASK_DEVICE\"\n");
}

void pypto_style_definitions(const TempDir& d) {
  write_project(d, {{"dist-system-tests.yml", "name: dist-system-tests\nsteps:\n  - name: Test distributed system tests\n    device-type: a2a3\n"
                                              "    devices: 2\n    timeout-minutes: 45\n    queue-timeout-minutes: 60\n    run-timeout-minutes: 30\n"
                                              "    run: |\n      source activate.sh\n      unset PTO2_RING_HEAP PTO2_RING_TASK_WINDOW\n"
                                              "      python -m pytest tests/st/distributed --device=$TASK_DEVICE\n"},
                    {"mixed-kernel-tests-a5.yml", "name: mixed-kernel-tests-a5\nsteps:\n  - name: Test on board\n    device-type: a5\n    devices: 1\n"
                                                  "    timeout-minutes: 30\n    queue-timeout-minutes: 60\n    run-timeout-minutes: 20\n"
                                                  "    run: python -m pytest tests/st/a5 --device=$TASK_DEVICE\n"}});
}

}  // namespace

TEST_CASE("lint --baseline: clean on a pypto-style tree as shipped, and a changed runs-on, a removed unset-ring, a changed step of a "
          "composite action and a stale entry are each reported",
          "[import]") {
  TempDir repo, defs, base;
  pypto_style_definitions(defs);
  pypto_style_repo(repo);
  const std::string wf = (repo.path() / ".github/workflows/ci.yml").string(), bl = (base.path() / "baseline.yml").string();
  auto lint = [&](const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"lint", "--workflow", wf, "--against", defs.str()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  // Without a baseline: the deliberate differences are findings (the job env an error, the action's step a warning).
  CommandResult raw = lint();
  INFO(raw.out << raw.err);
  CHECK(raw.exit_code == 1);
  CHECK(raw.out.find("job 'dist-system-tests': env CCACHE_MAXSIZE is '30G' in the workflow, not set in its definition") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(raw.out, m, std::regex(R"(step 'Write activate.sh' of ./.github/actions/setup \(script sha256 ([0-9a-f]{12}))")));
  const std::string sha = m[1].str();
  CHECK(raw.out.find("unset") == std::string::npos);  // unset-ring 'true' does what the definitions' unset line does
  base.write("baseline.yml", "- finding: \"step 'Write activate.sh' of ./.github/actions/setup (script sha256 " + sha + "\"\n"
                             "  reason: the lead job writes activate.sh\n"
                             "- finding: \"env CCACHE_MAXSIZE is '30G' in the workflow\"\n  reason: a setting of the build job\n");
  CommandResult clean = lint({"--baseline", bl});
  INFO(clean.out << clean.err);
  CHECK(clean.exit_code == 0);
  CHECK(clean.out.find("note: deliberate (the lead job writes activate.sh): step 'Write activate.sh'") != std::string::npos);
  CHECK(clean.out.find("error") == std::string::npos);
  CHECK(clean.out.find("warning") == std::string::npos);

  // The composite action itself is no workflow: said plainly, not "required key 'jobs' is missing".
  CommandResult action = run_cli({"lint", "--workflow", (repo.path() / ".github/actions/setup/action.yml").string()});
  CHECK(action.exit_code == 2);
  CHECK(action.out.find("this is an action (it has runs:), not a workflow") != std::string::npos);

  SECTION("a runs-on changed from npu-a5 to npu") {
    pypto_style_repo(repo, ", unset-ring: 'true'", "npu");
    CommandResult r = lint({"--baseline", bl});
    INFO(r.out);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("step 'Test on board' of job 'mixed-kernel-tests-a5': the card type (runs-on [self-hosted, linux, arm64, npu]) is "
                     "a2a3 in the workflow, a5 at jobs/mixed-kernel-tests-a5.yml:3:5 [drift]") != std::string::npos);
  }
  SECTION("unset-ring removed") {
    pypto_style_repo(repo, "");
    CommandResult r = lint({"--baseline", bl});
    INFO(r.out);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find("step 'Test distributed system tests' of job 'dist-system-tests': unset PTO2_RING_HEAP PTO2_RING_TASK_WINDOW is "
                     "not done in the workflow, done at jobs/dist-system-tests.yml:3:5 [drift]") != std::string::npos);
  }
  SECTION("a step inside the composite action changed") {
    pypto_style_repo(repo, ", unset-ring: 'true'", "npu-a5", "        echo 'export CCACHE_DIR=/srv/ccache' >> activate.sh\n");
    CommandResult r = lint({"--baseline", bl});
    INFO(r.out);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find(bl + ":1:3: error: no drift finding matches \"step 'Write activate.sh' of ./.github/actions/setup (script sha256 " + sha) ==
          std::string::npos);  // (quoted as it is written, below)
    CHECK(r.out.find(bl + ":1:3: error: no drift finding matches 'step 'Write activate.sh' of ./.github/actions/setup (script sha256 " + sha +
                     "': the difference it records is gone; remove the entry [stale-baseline]") != std::string::npos);
    CHECK(r.out.find("warning: step 'Write activate.sh' of ./.github/actions/setup (script sha256 ") != std::string::npos);
  }
  SECTION("a stale entry") {
    base.write("baseline.yml", read_file(bl) + "- finding: step 'Gone' of job 'dist-system-tests'\n  reason: it was removed long ago\n");
    CommandResult r = lint({"--baseline", bl});
    INFO(r.out);
    CHECK(r.exit_code == 1);
    CHECK(r.out.find(bl + ":5:3: error: no drift finding matches 'step 'Gone' of job 'dist-system-tests'' [stale-baseline]") == std::string::npos);
    CHECK(r.out.find(bl + ":5:3: error: no drift finding matches 'step 'Gone' of job 'dist-system-tests'': the difference it records is gone") !=
          std::string::npos);
  }
  SECTION("an entry without a reason") {
    base.write("baseline.yml", "- finding: anything\n");
    CommandResult r = lint({"--baseline", bl});
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(bl + ":1:3: error: a baseline entry needs 'reason': every deliberate difference says why [missing-key]") != std::string::npos);
  }
}

namespace {

// A YAML node's meaning as text, whatever its style (flow or block): what must survive the emitter.
std::string canon(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "~";
  if (n.IsScalar()) return (n.Tag() == "!" ? "'" : "") + n.Scalar();
  std::string out = n.IsMap() ? "{" : "[";
  for (const auto& x : n) out += n.IsMap() ? canon(x.first) + ":" + canon(x.second) + "," : canon(x) + ",";
  return out + (n.IsMap() ? "}" : "]");
}

}  // namespace

TEST_CASE("import: the system tests on the cards' simulators (pypto's system-tests-a5sim) move with the NPU jobs, with no "
          "card, and the emitted workflow submits them from the NPU host, while examples on a simulator stay in GitHub Actions",
          "[import]") {
  TempDir wf, out;
  wf.write("ci.yml",
           "name: ci\non: [pull_request]\njobs:\n"
           "  system-tests:\n    runs-on: [self-hosted, linux, arm64, npu]\n    steps:\n"
           "      - name: Shard A\n        run: task-submit --device-num 1 --run \"python -m pytest tests/st --device=\\$TASK_DEVICE\"\n"
           "  system-tests-a5sim:\n    runs-on: ubuntu-latest\n    steps:\n"
           "      - name: Test A5 system tests (simulator)\n        run: pytest tests/st/runtime/ops -v --platform=a5sim --forked\n"
           "      - name: Test A2A3 cross-core system tests (simulator)\n        run: pytest tests/st/runtime/cross_core -v --platform=a2a3sim\n"
           "  examples-tests:\n    runs-on: [self-hosted, linux, arm64, cpu]\n    steps:\n"
           "      - name: Run the teaching examples on the simulator\n        run: python examples/run_all.py --platform a2a3sim\n");
  out.write("toolchain/versions.env", valid_versions_env());
  const std::string f = (wf.path() / "ci.yml").string(), emitted = (out.path() / "emitted.yml").string();
  CommandResult r = run_cli({"import", "--workflow", f, "--out", out.str(), "--emit-workflow", emitted});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("(1 NPU job(s) and 1 simulator job(s) submit to pto-runner)") != std::string::npos);
  REQUIRE(fs::exists(out.path() / "jobs/system-tests-a5sim.yml"));
  CHECK_FALSE(fs::exists(out.path() / "jobs/examples-tests.yml"));
  CHECK(r.out.find("job 'examples-tests' stays in GitHub Actions") != std::string::npos);
  CHECK(r.out.find("job 'system-tests-a5sim' runs the cards' simulators") != std::string::npos);
  // No card for the simulators.
  CommandResult plan = run_cli({"--root", out.str(), "plan", "--job", "system-tests-a5sim", "--format", "json"});
  INFO(plan.out << plan.err);
  REQUIRE(plan.exit_code == 0);
  int sim_steps = 0;
  const nlohmann::json planned = nlohmann::json::parse(plan.out);
  for (const auto& j : planned["jobs"])
    if (j["name"] == "system-tests-a5sim")
      for (const auto& st : j["steps"]) {
        CHECK(st["devices"] == 0);
        ++sim_steps;
      }
  CHECK(sim_steps == 2);
  // The emitted job submits like the NPU jobs, from the NPU host, where the daemon's socket is.
  YAML::Node after = YAML::LoadFile(emitted);
  const YAML::Node a5sim = after["jobs"]["system-tests-a5sim"];
  CHECK(canon(a5sim["runs-on"]) == canon(after["jobs"]["system-tests"]["runs-on"]));
  REQUIRE(a5sim["steps"].size() == 1);
  CHECK(a5sim["steps"][0]["run"].as<std::string>() == "pto-runner submit --job system-tests-a5sim --attach --sha \"$SHA\" --ref \"$REF\" --follow");
  CHECK(after["jobs"]["examples-tests"]["steps"][0]["run"].as<std::string>() == "python examples/run_all.py --platform a2a3sim");
  CommandResult drift = run_cli({"lint", "--workflow", emitted, "--against", out.str()});
  INFO(drift.out);
  CHECK(drift.exit_code == 0);
}

TEST_CASE("import --emit-workflow: a pypto-style workflow (NPU jobs of task-submit steps, CPU jobs, a docs gate, a composite action) "
          "becomes one whose NPU jobs each submit with --attach: actionlint clean but for the runner labels, the same job names, needs and "
          "labels, the CPU jobs as they were, no drift against the imported tree, which simulates on typed cards",
          "[import]") {
  TempDir repo, defs, out;
  pypto_style_repo(repo);
  std::string text = read_file(repo.path() / ".github/workflows/ci.yml");
  // pypto's gates and a CPU job around the NPU jobs.
  text.replace(text.find("jobs:\n"), 6,
               "permissions:\n  contents: read\nconcurrency:\n  group: ci-${{ github.ref }}\n  cancel-in-progress: true\njobs:\n"
               "  changes:\n    runs-on: ubuntu-latest\n    outputs:\n      docs_only: ${{ steps.d.outputs.docs_only }}\n    steps:\n"
               "      - id: d\n        run: echo \"docs_only=false\" >> \"$GITHUB_OUTPUT\"\n"
               "  unit-tests:\n    needs: [changes]\n    runs-on: ubuntu-latest\n    strategy:\n      matrix:\n        python: ['3.10', '3.11']\n"
               "    steps:\n      - uses: actions/setup-python@v5\n        with:\n          python-version: ${{ matrix.python }}\n"
               "      - run: |\n          pip install -e .\n          pytest tests/ut\n");
  for (const std::string job : {"  dist-system-tests:\n", "  mixed-kernel-tests-a5:\n"})
    text.replace(text.find(job), job.size(), job + "    needs: [changes]\n    if: needs.changes.outputs.docs_only != 'true'\n    timeout-minutes: 90\n");
  repo.write(".github/workflows/ci.yml", text);
  repo.write("toolchain/versions.env", valid_versions_env());  // the pin, where pypto keeps it: import copies it
  const std::string wf = (repo.path() / ".github/workflows/ci.yml").string(), emitted = (out.path() / "ci.yml").string();
  CommandResult imp = run_cli({"import", "--workflow", wf, "--out", defs.str(), "--emit-workflow", emitted});
  INFO(imp.out << imp.err);
  REQUIRE(imp.exit_code == 0);
  CHECK(imp.out.find("(2 NPU job(s) submit to pto-runner)") != std::string::npos);

  YAML::Node before = YAML::LoadFile(wf), after = YAML::LoadFile(emitted);
  // Same jobs, needs, if, runs-on, timeout; the NPU jobs' steps are one submit; the CPU jobs are as they were.
  REQUIRE(after["jobs"].size() == before["jobs"].size());
  for (const auto& kv : before["jobs"]) {
    const std::string id = kv.first.Scalar();
    INFO(id);
    const YAML::Node b = kv.second, a = after["jobs"][id];
    REQUIRE(a.IsMap());
    for (const char* key : {"needs", "if", "runs-on", "timeout-minutes"})
      CHECK(canon(a[key]) == canon(b[key]));
    if (id == "dist-system-tests" || id == "mixed-kernel-tests-a5") {
      REQUIRE(a["steps"].size() == 1);
      CHECK(a["steps"][0]["run"].as<std::string>() == "pto-runner submit --job " + id + " --attach --sha \"$SHA\" --ref \"$REF\" --follow");
      CHECK(a["steps"][0]["env"]["SHA"].as<std::string>() == "${{ github.sha }}");
    } else {
      CHECK(canon(a["steps"]) == canon(b["steps"]));
    }
  }
  CHECK(read_file(emitted).find("'3.10'") != std::string::npos);  // still a string, not the number 3.1
  // actionlint, with pypto's custom runner labels only.
  std::string lint_out;
  CHECK(sh("node " + (source_dir() / "tests/fixtures/actionlint.cjs").string() + " --allow-label npu --allow-label npu-a5 " + emitted + " 2>&1",
           &lint_out) == 0);
  INFO(lint_out);
  CHECK(lint_out.empty());
  // No drift between the emitted workflow and the imported tree.
  CommandResult drift = run_cli({"lint", "--workflow", emitted, "--against", defs.str()});
  INFO(drift.out);
  CHECK(drift.exit_code == 0);
  CHECK(drift.out.find("[drift]") == std::string::npos);
  // The imported tree runs, simulated, on typed cards.
  CommandResult sim = run_cli({"run", "--root", defs.str(), "--simulate", "--devices", "a2a3:0-7,a5:8-9", "--state-dir", (out.path() / "state").string()});
  INFO(sim.out << sim.err);
  CHECK(sim.exit_code == 0);
}
