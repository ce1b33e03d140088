// `pto-runner import --workflow` and `lint --workflow --against`: a workflow in pypto's style (task-submit
// wrapped device steps, pypto's checkout layout) becomes definitions that plan exactly as hand-written ones,
// what cannot be carried over is listed at its line, and drift between the two is found.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <regex>

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
                {{"qwen3-14b.yml", "model: Qwen3-14B\ndir: models/qwen3_14b\ncommand: |-\n  source activate.sh\n"
                                   "  source ./activate.sh && cd ../pypto-lib && python {dir}/{example}.py -p a2a3 -d $TASK_DEVICE {args}\n"
                                   "queue-timeout-minutes: 60\nrun-timeout-minutes: 30\nexamples:\n  - {name: decode_fwd}\n  - {name: prefill_fwd}\n"},
                 {"deepseek-v4-flash.yml", "model: DeepSeek-V4-Flash\ndir: models/deepseek_v4_flash_mtp\ncommand: |-\n  source activate.sh\n"
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
  CHECK(r.out.find("env PYTHONPATH: ${{ github.workspace }}/pypto-lib reads a GitHub-only context") != std::string::npos);
  // Nothing is overwritten without --force.
  CommandResult again = run_cli({"import", "--workflow", f, "--out", imported.str()});
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("exists; nothing written") != std::string::npos);
}

TEST_CASE("lint --workflow --against: a changed card count and a missing step are drift at the workflow's lines", "[import]") {
  TempDir wf, defs;
  hand_written(defs);
  wf.write("same.yml", workflow());
  const std::string same = (wf.path() / "same.yml").string();
  CommandResult clean = run_cli({"lint", "--workflow", same, "--against", defs.str()});
  INFO(clean.out);
  CHECK(clean.out.find("[drift]") == std::string::npos);
  wf.write("drifted.yml", workflow(" --device-num 1", model_step("DeepSeek-V4-Flash", "models/deepseek_v4_flash_mtp", "prefill_csa", "", "")));
  const std::string drifted = (wf.path() / "drifted.yml").string();
  CommandResult r = run_cli({"lint", "--workflow", drifted, "--against", defs.str()});
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find(drifted + ":56:9: error: step 'Run pypto-lib DeepSeek-V4-Flash moe example' of job 'pypto-lib-model': the "
                             "workflow asks task-submit for 1 card(s), models/deepseek-v4-flash.yml:10:5 for 2 [drift]") !=
        std::string::npos);
  CHECK(r.out.find(drifted + ":62:9: error: step 'Run pypto-lib DeepSeek-V4-Flash prefill_csa example' of job 'pypto-lib-model' "
                             "is not in the definitions") != std::string::npos);
}
