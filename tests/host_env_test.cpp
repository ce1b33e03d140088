// The host's environment for steps (runner.yml env, env-file: a GitHub runner's .env) and pto-runner's own
// task-submit first on every step's PATH, through the real binary.
#include <catch2/catch.hpp>

#include "test_support.h"

using namespace pto::test;

TEST_CASE("host env: runner.yml env and env-file reach every step under the job's and the step's own env, and the "
          "step's task-submit is pto-runner's even with another first on the runner's PATH", "[host]") {
  TempDir d;
  const fs::path out = d.path() / "seen";
  // The incumbent's task-submit, earlier on the PATH the runner was started with.
  d.write("incumbent/task-submit", "#!/bin/sh\necho incumbent\n");
  fs::permissions(d.path() / "incumbent/task-submit", fs::perms::owner_all);
  d.write("host.env", "# the runner's .env\nCI_CACHE_ROOT=/srv/cache\nCANN_ROOT=/usr/local/Ascend\nPTO2_RING_SIZE=4 # as written\n"
                      "SHARED=from-file\nBY_JOB=from-file\n");
  d.write("runner.yml", "env-file: host.env\nenv: {SHARED: from-runner-yml, ONLY_YML: yes}\n");
  write_project(d, {{"e.yml", "name: e\nenv: {BY_JOB: from-job}\nsteps:\n  - name: s\n    env: {BY_STEP: from-step}\n    run: |\n"
                              "      for v in CI_CACHE_ROOT CANN_ROOT PTO2_RING_SIZE SHARED BY_JOB BY_STEP ONLY_YML; do\n"
                              "        echo \"$v=$(printenv $v)\" >> " + out.string() + "\n      done\n"
                              "      echo \"task-submit=$(command -v task-submit)\" >> " + out.string() + "\n"}});
  CommandResult r = run_cli({"--root", d.str(), "run", "--lock-dir", (d.path() / "locks").string(), "--state-dir", (d.path() / "state").string()},
                            {{"PATH", (d.path() / "incumbent").string() + ":" + std::getenv("PATH")}});
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  std::string seen = read_file(out);
  CHECK(seen.find("CI_CACHE_ROOT=/srv/cache\n") != std::string::npos);
  CHECK(seen.find("CANN_ROOT=/usr/local/Ascend\n") != std::string::npos);
  CHECK(seen.find("PTO2_RING_SIZE=4 # as written\n") != std::string::npos);  // the value as written, like the runner's .env
  CHECK(seen.find("SHARED=from-runner-yml\n") != std::string::npos);         // runner.yml env over env-file
  CHECK(seen.find("BY_JOB=from-job\n") != std::string::npos);                // the job's over the host's
  CHECK(seen.find("BY_STEP=from-step\n") != std::string::npos);
  CHECK(seen.find("ONLY_YML=yes\n") != std::string::npos);
  const std::string ts = seen.substr(seen.find("task-submit=") + 12);
  CHECK(ts.find("incumbent") == std::string::npos);
  CHECK(ts.find("/state/tools/task-submit") != std::string::npos);
  std::string runs;
  CHECK(sh("'" + ts.substr(0, ts.find('\n')) + "' --version", &runs) == 0);
  CHECK(runs.find("pto-task-submit") == 0);
}

TEST_CASE("host env: a line of the env-file that is not KEY=VALUE stops the run at its line and column, exit 2", "[host]") {
  TempDir d;
  d.write("host.env", "GOOD=1\n  export BAD LINE\n");
  d.write("runner.yml", "env-file: host.env\n");
  write_project(d, {{"e.yml", "name: e\nsteps:\n  - run: 'true'\n"}});
  CommandResult r = run_cli({"--root", d.str(), "run", "--lock-dir", (d.path() / "locks").string(), "--state-dir", (d.path() / "state").string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("host.env:2:3: error: env-file: a line is KEY=VALUE") != std::string::npos);
}
