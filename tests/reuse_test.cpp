// Nothing run twice (reuse/): a step whose inputs were already tested green is `reused`, not run again, with a
// link to the run it came from. A daemon with `source:` runs commits of a real git repository; marker files
// say which steps really ran.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>

#include "reuse/result_key.h"
#include "served_daemon.h"
#include "source_repo.h"
#include "test_support.h"

using namespace pto::test;

namespace {

struct ReuseDaemon {
  SourceRepo repo;
  Served served;
  std::string out() const { return (served.dir.path() / "out").string(); }
  void start(const std::string& more_settings = "") {
    fs::create_directories(out());
    served.dir.write("runner.yml", "source:\n  repo: " + repo.path() + "\n" + more_settings);
    served.start();
  }
  json run(const std::string& sha, const std::string& ref, bool reuse = true) const {
    json body = {{"sha", sha}, {"ref", ref}, {"env", {{"OUT", out()}}}};
    if (!reuse) body["reuse"] = false;
    json r = served.wait_run(served.submit_run(body), 60);
    INFO(r.dump(2));
    return r;
  }
  /// How many times step `name` really ran (its marker's lines).
  int ran(const std::string& name) const {
    std::ifstream in(fs::path(out()) / name);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
};

const json& step(const json& run, int i) { return run["jobs"][0]["steps"][i]; }

const json& job_of(const json& run, const std::string& id) {
  for (const auto& j : run["jobs"])
    if (j["id"] == id) return j;
  FAIL("no job " << id);
  throw;
}

}  // namespace

TEST_CASE("reuse: the result key leaves out what names the run and keeps what the step depends on", "[reuse]") {
  pto::ResultKeyParts a;
  a.step_key = "k";
  a.inputs_tree = "tree1";
  a.host_env = {{"PTO_RUNNER_REF", "refs/pull/1/merge"}, {"GITHUB_SHA", "abc"}, {"CANN_ROOT", "/opt/cann"}};
  pto::ResultKeyParts b = a;
  b.host_env["PTO_RUNNER_REF"] = "refs/heads/main";
  b.host_env["RUNNER_TEMP"] = "/tmp/x";
  CHECK(pto::result_key(a) == pto::result_key(b));
  for (auto change : std::vector<std::function<void(pto::ResultKeyParts&)>>{
           [](pto::ResultKeyParts& p) { p.inputs_tree = "tree2"; }, [](pto::ResultKeyParts& p) { p.host_env["CANN_ROOT"] = "/other"; },
           [](pto::ResultKeyParts& p) { p.toolchain = "v0.53"; }, [](pto::ResultKeyParts& p) { p.card_type = "a5"; },
           [](pto::ResultKeyParts& p) { p.needs_outputs["lib"]["commit"] = "c2"; }, [](pto::ResultKeyParts& p) { p.job_env["X"] = "1"; }}) {
    pto::ResultKeyParts c = a;
    change(c);
    CHECK(pto::result_key(c) != pto::result_key(a));
  }
}

TEST_CASE("reuse: main's run of a tree its pull request tested green reuses every step, while another pull request, "
          "--no-reuse, a red result and a change of the inputs run again, and a docs-only change reuses the steps that do not read docs",
          "[reuse]") {
  ReuseDaemon d;
  d.repo.write("src/a.c", "int a;\n");
  d.repo.write("docs/x.md", "# x\n");
  d.repo.write("jobs/t.yml", "name: t\nsteps:\n"
                             "  - name: unit\n    devices: 1\n    reuse: {inputs: ['src/**']}\n"
                             "    run: echo $PTO_RUNNER_RUN_ID >> \"$OUT/unit\" && test ! -e \"$OUT/fail-unit\"\n"
                             "  - name: system\n    devices: 1\n    run: echo $PTO_RUNNER_RUN_ID >> \"$OUT/system\"\n"
                             "  - name: writes-env\n    run: echo \"X=1\" >> \"$GITHUB_ENV\"; echo $PTO_RUNNER_RUN_ID >> \"$OUT/env\"\n");
  const std::string a = d.repo.commit("a");
  d.start();

  const json pr1 = d.run(a, "refs/pull/1/merge");
  REQUIRE(pr1["state"] == "succeeded");
  CHECK(d.ran("unit") == 1);
  // Another pull request of the very tree runs it all: it never takes another pull request's results.
  const json pr2 = d.run(a, "refs/pull/2/merge");
  REQUIRE(pr2["state"] == "succeeded");
  CHECK(d.ran("unit") == 2);
  CHECK(step(pr2, 0)["state"] == "succeeded");

  // The merge: a new commit of the same tree, on main.
  const std::string merged = d.repo.commit("merge");  // the same tree
  // Through `submit`, as a workflow runs it: its lines and its step summary say what was reused and from where.
  const std::string summary = (d.served.dir.path() / "summary.md").string();
  CommandResult submitted = run_cli({"submit", "--server", d.served.url(), "--wait", "--sha", merged, "--ref", "refs/heads/main",
                                     "--env", "OUT=" + d.out(), "--poll-interval", "0.1"},
                                    {{"GITHUB_ACTIONS", "true"}, {"PTO_RUNNER_TOKEN", d.served.token}, {"GITHUB_STEP_SUMMARY", summary}});
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  std::smatch id;
  REQUIRE(std::regex_search(submitted.out, id, std::regex("run (\\S+): succeeded")));
  const json main1 = d.served.get(pto::api_path::run(id[1]));
  REQUIRE(main1["state"] == "succeeded");
  CHECK(d.ran("unit") == 2);
  CHECK(d.ran("system") == 2);
  CHECK(step(main1, 0)["state"] == "reused");
  CHECK(step(main1, 1)["state"] == "reused");
  const std::string from = step(main1, 0)["reused_from"]["run"];
  CHECK((from == pr1["id"] || from == pr2["id"]));
  CHECK(step(main1, 0)["reused_from"]["text"].get<std::string>().find("reused from run " + from) == 0);
  CHECK(step(main1, 0)["log"].get<std::string>().find(from) != std::string::npos);  // its log is the one it came from
  CHECK(submitted.out.find("<== t / unit: reused") != std::string::npos);
  CHECK(submitted.out.find("reused from run " + from + ", step t / unit") != std::string::npos);
  CHECK(read_file(summary).find("| t | unit | reused |") != std::string::npos);
  CHECK(read_file(summary).find("reused from run " + from) != std::string::npos);
  // A step that hands $GITHUB_ENV to later steps is not kept for reuse: it runs again.
  CHECK(step(main1, 2)["state"] == "succeeded");
  CHECK(d.ran("env") == 3);
  const std::string metrics = pto::api_request("GET", d.served.url("/metrics")).body;
  CHECK(metrics.find("pto_runner_steps_reused_total 2") != std::string::npos);
  // The run's page draws a reused step apart, with where it came from.
  std::string dom;
  if (d.served.page_dom(dom, pto::api_path::run_page(main1["id"].get<std::string>()))) {
    INFO(dom.substr(0, 4000));
    CHECK(dom.find("reused, not run: reused from run " + from) != std::string::npos);
    CHECK(dom.find("data-state=\"reused\"") != std::string::npos);
  }

  // --no-reuse: everything runs.
  const json fresh = d.run(merged, "refs/heads/main", false);
  CHECK(step(fresh, 0)["state"] == "succeeded");
  CHECK(d.ran("unit") == 3);

  // A docs-only change: the unit step reads src/ only.
  d.repo.write("docs/x.md", "# x, reworded\n");
  const std::string docs = d.repo.commit("docs");
  const json main2 = d.run(docs, "refs/heads/main");
  CHECK(step(main2, 0)["state"] == "reused");
  CHECK(step(main2, 1)["state"] == "succeeded");
  CHECK(d.ran("unit") == 3);
  CHECK(d.ran("system") == 4);

  // A red result is never reused: the same tree runs again once whatever broke it is gone.
  d.repo.write("src/a.c", "int a2;\n");
  const std::string changed = d.repo.commit("src");
  d.served.dir.write("out/fail-unit", "");
  const json red = d.run(changed, "refs/heads/main");
  CHECK(red["state"] == "failed");
  CHECK(d.ran("unit") == 4);
  fs::remove(d.served.dir.path() / "out/fail-unit");
  const json green = d.run(changed, "refs/heads/main");
  CHECK(green["state"] == "succeeded");
  CHECK(step(green, 0)["state"] == "succeeded");
  CHECK(d.ran("unit") == 5);
}

TEST_CASE("reuse: a step runs again when a job it needs fetched something else (its output changed), and is reused while "
          "it is the same", "[reuse]") {
  ReuseDaemon d;
  // `lib` fetches from outside the commit (here a file beside it) and says what it got, as the shipped
  // pypto-lib-checkout says the commit it cloned.
  d.repo.write("jobs/lib.yml", "name: lib\nreuse: false\noutputs:\n  commit: ${{ steps.get.outputs.commit }}\nsteps:\n"
                               "  - id: get\n    run: echo \"commit=$(cat \"$OUT/lib-commit\")\" >> \"$GITHUB_OUTPUT\"\n");
  d.repo.write("jobs/model.yml", "name: model\nneeds: [lib]\nsteps:\n"
                                 "  - name: moe\n    devices: 2\n    run: echo $PTO_RUNNER_RUN_ID >> \"$OUT/moe\"\n");
  const std::string a = d.repo.commit("a");
  d.start();
  d.served.dir.write("out/lib-commit", "c1\n");
  auto moe = [](const json& run) {
    for (const auto& j : run["jobs"])
      if (j["id"] == "model") return j["steps"][0];
    return json();
  };
  REQUIRE(d.run(a, "refs/heads/main")["state"] == "succeeded");
  CHECK(d.ran("moe") == 1);
  const json same = d.run(a, "refs/heads/main");
  CHECK(moe(same)["state"] == "reused");
  CHECK(moe(same)["reused_from"]["card_seconds"].get<double>() > 0);  // two cards for as long as it ran
  // The card-seconds it saved are counted in the metrics.
  const std::string metrics = pto::api_request("GET", d.served.url("/metrics")).body;
  std::smatch saved;
  REQUIRE(std::regex_search(metrics, saved, std::regex("\npto_runner_card_seconds_saved_total ([0-9.e+-]+)\n")));
  CHECK(std::stod(saved[1]) == Approx(moe(same)["reused_from"]["card_seconds"].get<double>()));
  d.served.dir.write("out/lib-commit", "c2\n");
  const json other = d.run(a, "refs/heads/main");
  CHECK(moe(other)["state"] == "succeeded");
  CHECK(d.ran("moe") == 2);
}

TEST_CASE("reuse: a reused step with tests shows the cases of the run it came from, and the test history counts them once",
          "[reuse]") {
  ReuseDaemon d;
  d.repo.write("jobs/u.yml", "name: u\nsteps:\n  - name: cases\n    tests: {junit: 'cases.xml'}\n    run: |\n"
                             "      echo $PTO_RUNNER_RUN_ID >> \"$OUT/cases\"\n"
                             "      echo '<testsuite><testcase classname=\"t\" name=\"a\"/><testcase classname=\"t\" name=\"b\"/></testsuite>' > cases.xml\n");
  const std::string a = d.repo.commit("a");
  d.start();
  const json pr = d.run(a, "refs/pull/4/merge");
  REQUIRE(pr["state"] == "succeeded");
  CHECK(step(pr, 0)["tests"]["passed"] == 2);
  const std::string merged = d.repo.commit("merge");  // the same tree
  const json main = d.run(merged, "refs/heads/main");
  CHECK(step(main, 0)["state"] == "reused");
  CHECK(d.ran("cases") == 1);
  CHECK(step(main, 0)["tests"]["passed"] == 2);
  const json cases = d.served.get(pto::api_path::run_tests(main["id"]));
  INFO(cases.dump());
  CHECK(cases.dump().find("\"t::a\"") != std::string::npos);
  // The test history has the one run that ran them (its pull request's): main's reused copy is no result of main.
  const json on_pr = d.served.get(std::string(pto::api_path::kTests) + "/t::a?ref=refs/pull/4/merge");
  const json on_main = d.served.get(std::string(pto::api_path::kTests) + "/t::a?ref=refs/heads/main");
  INFO(on_pr.dump() << "\n" << on_main.dump());
  CHECK(on_pr.dump().find(pr["id"].get<std::string>()) != std::string::npos);
  CHECK(on_main.dump().find(main["id"].get<std::string>()) == std::string::npos);
}

TEST_CASE("reuse: a job whose steps were all tested green waits for nothing and its build is not run, while a flaky result, "
          "a new toolchain pin and another card type make the step run again", "[reuse]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  ReuseDaemon d;
  d.served.devices = "";  // the cards and their types are runner.yml's
  d.repo.write("src/a.c", "int a;\n");
  // test_flaky fails the first time it ever runs (its mark is outside the tree), then passes: a flake.
  d.repo.write("tests/test_f.py", "import os\nMARK = os.path.join(os.environ['OUT'], 'flaky-once')\n"
                                  "def test_steady(): pass\n"
                                  "def test_flaky():\n    first = not os.path.exists(MARK)\n    open(MARK, 'w').close()\n    assert not first\n");
  d.repo.write("jobs/build.yml", "name: build\nreuse: false\nsteps:\n  - run: echo $PTO_RUNNER_RUN_ID >> \"$OUT/build\"\n");
  auto tests_job = [](const std::string& type) {
    return "name: t\nneeds: [build]\nreuse: {inputs: ['src/**', 'tests/**']}\nsteps:\n  - name: cases\n    devices: 1\n"
           "    device-type: " + type + "\n    tests: pytest\n    run: echo $PTO_RUNNER_RUN_ID >> \"$OUT/cases\" && " +
           std::string(kPytest) + " tests\n";
  };
  d.repo.write("jobs/t.yml", tests_job("a2a3"));
  const std::string a = d.repo.commit("a");
  d.start("devices:\n  ids: [0, 1, 2, 3]\n  types: {a2a3: [0, 1], a5: [2, 3]}\n");
  auto cases = [](const json& run) { return job_of(run, "t")["steps"][0]; };

  // The pull request's run was green only through a flaky test: main's run of its merge runs the step again.
  const json pr = d.run(a, "refs/pull/7/merge");
  REQUIRE(pr["state"] == "succeeded");
  CHECK(cases(pr)["tests"]["flaky"] == 1);
  CHECK(d.ran("cases") == 2);  // its rerun of the failed test is a second attempt
  const json main1 = d.run(d.repo.commit("merge"), "refs/heads/main");
  REQUIRE(main1["state"] == "succeeded");
  CHECK(cases(main1)["state"] == "succeeded");
  CHECK(d.ran("cases") == 3);
  CHECK(d.ran("build") == 2);

  // Now green with nothing doubtful: the next run of the tree reuses it, and the build it needs is not run.
  const json main2 = d.run(d.repo.commit("again"), "refs/heads/main");
  REQUIRE(main2["state"] == "succeeded");
  CHECK(cases(main2)["state"] == "reused");
  CHECK(job_of(main2, "build")["state"] == "skipped");
  CHECK(job_of(main2, "build")["reason"].get<std::string>().find("not needed") == 0);
  CHECK(d.ran("build") == 2);
  CHECK(d.ran("cases") == 3);

  // A new toolchain pin (the pin is an input of every step, whatever its globs say).
  std::string pin = valid_versions_env();
  pin.replace(pin.find("v0.52"), 5, "v0.53");
  d.repo.write("toolchain/versions.env", pin);
  const json pinned = d.run(d.repo.commit("pin"), "refs/heads/main");
  CHECK(cases(pinned)["state"] == "succeeded");
  CHECK(d.ran("cases") == 4);
  CHECK(d.ran("build") == 3);  // the job runs, so what it needs runs first

  // Another card type: jobs/ is not among the inputs, but the card type is in the key.
  d.repo.write("jobs/t.yml", tests_job("a5"));
  const json a5 = d.run(d.repo.commit("a5"), "refs/heads/main");
  CHECK(cases(a5)["state"] == "succeeded");
  CHECK(cases(a5)["cards"][0].get<int>() >= 2);
  CHECK(d.ran("cases") == 5);
}

TEST_CASE("reuse: a run taken over by the next daemon keeps the results of its steps that end after the take-over", "[reuse][supervise]") {
  ReuseDaemon d;
  d.repo.write("jobs/t.yml", "name: t\nsteps:\n  - name: long\n    devices: 1\n"
                             "    run: echo $PTO_RUNNER_RUN_ID >> \"$OUT/long\"; touch \"$OUT/started\"; sleep 2\n"
                             "  - name: after\n    run: echo $PTO_RUNNER_RUN_ID >> \"$OUT/after\"\n");
  const std::string a = d.repo.commit("a");
  d.start();
  const std::string id = d.served.submit_run({{"sha", a}, {"ref", "refs/heads/main"}, {"env", {{"OUT", d.out()}}}});
  REQUIRE(wait_until([&] { return fs::exists(fs::path(d.out()) / "started"); }, 30));
  d.served.stop(SIGKILL);
  d.served.listen = "127.0.0.1:" + std::to_string(d.served.port);
  d.served.start();
  const json taken = d.served.wait_run(id, 60);
  INFO(taken.dump(2));
  REQUIRE(taken["state"] == "succeeded");
  // Both ended under the second daemon, which kept them: the same tree runs nothing.
  const json again = d.run(d.repo.commit("same tree"), "refs/heads/main");
  CHECK(step(again, 0)["state"] == "reused");
  CHECK(step(again, 1)["state"] == "reused");
  CHECK(step(again, 0)["reused_from"]["run"] == id);
  CHECK(d.ran("long") == 1);
  CHECK(d.ran("after") == 1);
}
