// Every test case known (issue 32): a step's test cases from real pytest (Debian's python3-pytest, through
// pto-runner's plugin, the step's command unchanged) and from JUnit files; victims of a card that broke,
// charged to it once; a retry that reruns only what has not passed, on other cards; "ran no tests"; hostile
// reports refused. The suites are generated: their tests take cards from TASK_DEVICE as pypto's conftest
// hands devices to tests, and a "bad card" is card 2 printing pypto's 507018 fault from the middle on.
#include <catch2/catch.hpp>

#include <pugixml.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "config/job_file.h"
#include "sandbox_users.h"
#include "served_daemon.h"
#include "test_support.h"
#include "testcases/junit_reader.h"
#include "testcases/report_files.h"
#include "testcases/verdict.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;
using pto::FailureCause;
using pto::TestCase;
using pto::TestResult;

namespace {

// pypto's way: the step's cards come in TASK_DEVICE, each test takes the next one, and the harness says
// which ("[DEVICE] NODEID -> device N", on the real terminal). Card 2 is broken from test 30 on: every test
// on it fails with pypto's 507018. `real_failure`: one test fails by itself wherever it runs.
void write_suite(const fs::path& dir, int tests, bool real_failure) {
  fs::create_directories(dir);
  std::ofstream(dir / "conftest.py") << R"(import os, sys, itertools, pytest
_cards = [int(c) for c in os.environ["TASK_DEVICE"].split(",")]
_next = itertools.count()

@pytest.fixture
def device(request):
    n = next(_next)
    card = _cards[n % len(_cards)]
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        sys.stdout.write("\n[DEVICE] %s -> device %d\n" % (request.node.nodeid, card))
    return (n, card)
)";
  std::ofstream t(dir / "test_suite.py");
  t << "import pytest\n\n";
  t << "@pytest.mark.parametrize('case', range(" << tests - (real_failure ? 1 : 0) << "))\n"
    << "def test_kernel(device, case):\n"
    << "    n, card = device\n"
    << "    if card == 2 and n >= 30:\n"
    << "        print('aclrtSynchronizeStream failed: 507018 on device', card)\n"
    << "        raise RuntimeError('the device stream failed')\n";
  if (real_failure) t << "\ndef test_real(device):\n    assert 1 + 1 == 3, 'the sum is wrong'\n";
}

const json& step_of(const json& run, int job = 0, int step = 0) { return run["jobs"][job]["steps"][step]; }

std::vector<json> cases_of(const json& step, int attempt) {
  std::vector<json> out;
  for (const auto& c : step["tests"]["cases"])
    if (c["attempt"] == attempt) out.push_back(c);
  return out;
}

int charges_of(const Served& s, int card, const std::string& run) {
  int n = 0;
  const json status = s.get(pto::api_path::kStatus);
  for (const auto& d : status["devices"])
    if (d["id"] == card)
      for (const auto& e : d["health"]["evidence"]) n += e.get<std::string>().find(run) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("test results: tests: is read in its three forms, and wrong ones are errors at their line", "[tests]") {
  TempDir t;
  auto load = [&](const std::string& tests) {
    auto f = t.write("jobs/a.yml", "steps:\n  - run: 'true'\n    tests: " + tests + "\n");
    pto::Diagnostics d;
    pto::JobDef job = pto::load_job_file(f.string(), "jobs/a.yml", "a", d);
    return std::make_pair(job.steps.empty() ? pto::TestsSpec{} : job.steps[0].tests, d);
  };
  auto [p, d1] = load("pytest");
  CHECK(p.format == pto::TestsSpec::Format::Pytest);
  CHECK_FALSE(d1.has_errors());
  auto [j, d2] = load("{junit: 'build/*.xml'}");
  CHECK(j.format == pto::TestsSpec::Format::Junit);
  CHECK(j.path == "build/*.xml");
  auto [l, d3] = load("{format: junit, path: out/report.xml, allow-empty: true, rerun: 'ctest -R {tests}'}");
  CHECK(l.allow_empty);
  CHECK(l.rerun == "ctest -R {tests}");
  CHECK_FALSE(d3.has_errors());
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"unittest", "jobs/a.yml:3:12: error: step: 'tests' is pytest"},
           {"{format: junit}", "names its reports"},
           {"{junit: '/etc/*.xml'}", "must be relative"},
           {"{junit: 'a.xml', rerun: 'ctest'}", "{tests}"},
           {"{format: pytest, path: x.xml}", "written by pto-runner's plugin"}}) {
    auto [spec, d] = load(bad);
    INFO(bad);
    CHECK(d.has_errors());
    std::string text;
    for (const auto& item : d.items()) text += pto::format_diagnostic(item) + "\n";
    CHECK(text.find(says) != std::string::npos);
  }
}

TEST_CASE("test results: victims follow a card that broke in the same process only, and a rerun that passes makes a failure "
          "flaky or recovered", "[tests]") {
  pto::HealthConfig h;
  h.fault_patterns.push_back({"507018", std::make_shared<const std::regex>("507018"), FailureCause::Card, 0});
  auto tc = [](std::string id, TestResult r, std::vector<int> cards, std::string msg = "", int process = 0) {
    TestCase c;
    c.id = std::move(id);
    c.result = r;
    c.cards = std::move(cards);
    c.message = std::move(msg);
    c.process = process;
    return c;
  };
  std::vector<TestCase> cases = {tc("a", TestResult::Failed, {1}, "AssertionError"),
                                 tc("b", TestResult::Failed, {2}, "aclrtSynchronizeStream failed: 507018"),
                                 tc("c", TestResult::Failed, {2}, "RuntimeError: garbage"),
                                 tc("d", TestResult::Passed, {2}),
                                 tc("e", TestResult::Error, {2}, "chip run lane is poisoned"),
                                 tc("f", TestResult::Failed, {2}, "AssertionError", 1),  // another process
                                 tc("g", TestResult::Failed, {3}, "AssertionError")};
  pto::AttemptTests a = pto::judge_attempt(cases, h, {1, 2, 3}, {});
  CHECK(a.code_failures == 3);  // a, f (its process saw no break), g
  REQUIRE(a.breaks.size() == 1);
  CHECK(a.breaks[0].card == 2);
  CHECK(a.breaks[0].test == "b");
  CHECK(a.breaks[0].victims == 2);  // c and e
  CHECK(cases[2].result == TestResult::Victim);
  CHECK(cases[2].victim_of == "b");
  CHECK(cases[4].result == TestResult::Victim);
  CHECK(cases[5].cause == FailureCause::Code);
  CHECK(a.charged_cards() == std::vector<int>{2});
  // A poison line alone breaks the card too, and a card named by the log wins over the step's.
  std::vector<TestCase> poisoned = {tc("p", TestResult::Failed, {}, "device is already owned by another live ChipWorker"),
                                    tc("q", TestResult::Failed, {}, "timeout")};
  pto::AttemptTests pa = pto::judge_attempt(poisoned, h, {0, 1}, {{"p", {1}}, {"q", {1}}});
  CHECK(pa.code_failures == 0);
  CHECK(poisoned[1].result == TestResult::Victim);
  // The second attempt reruns the failures on other cards: a and the victims pass, g fails again.
  std::vector<TestCase> all = cases;
  for (const char* id : {"a", "b", "c", "e", "f"}) all.push_back(tc(id, TestResult::Passed, {5})), all.back().attempt = 2;
  all.push_back(tc("g", TestResult::Failed, {5}, "AssertionError")), all.back().attempt = 2;
  all.back().cause = FailureCause::Code;
  pto::TestsSummary s = pto::summarize_tests(all);
  CHECK(s.unresolved == std::vector<std::string>{"g"});
  CHECK(s.code_failure);
  CHECK(s.flaky == 2);      // a and f failed by themselves and then passed
  CHECK(s.recovered == 3);  // b, c, e: the card's
  CHECK(s.done.count("d"));
  CHECK(s.verdict.find("1 failed (g: AssertionError)") != std::string::npos);
  CHECK(s.verdict.find("2 victims of b on card 2, all passed on other cards (b itself passed there)") != std::string::npos);
  CHECK(s.verdict.find("2 flaky") != std::string::npos);
  CHECK(pto::device_lines("x\n[DEVICE] t.py::k[3] -> device 7\n") == std::map<std::string, std::vector<int>>{{"t.py::k[3]", {7}}});
}

TEST_CASE("test results: JUnit reports are read as hostile input: a malformed one is refused at its line and column, links and "
          "FIFOs are never followed, a DTD's entities are not expanded", "[tests]") {
  TempDir t;
  t.write("r/ok.xml", "<testsuites><testsuite><testcase classname='unit' name='adds' time='0.5' file='t.cpp' line='7'/>"
                      "<testcase classname='unit' name='fails'><failure message='boom'>trace</failure></testcase>"
                      "<testcase classname='unit' name='later'><skipped/></testcase></testsuite></testsuites>");
  auto found = pto::collect_reports(t.str(), "r/*.xml", 1 << 20, 10);
  REQUIRE(found.error.empty());
  REQUIRE(found.files.size() == 1);
  auto parsed = pto::parse_junit(pto::read_report(found.files[0]), 0, false);
  REQUIRE(parsed.error.empty());
  REQUIRE(parsed.cases.size() == 3);
  CHECK(parsed.cases[0].id == "unit::adds");
  CHECK(parsed.cases[0].file == "t.cpp");
  CHECK(parsed.cases[0].line == 7);
  CHECK(parsed.cases[1].result == TestResult::Failed);
  CHECK(parsed.cases[1].message == "boom");
  CHECK(parsed.cases[2].result == TestResult::Skipped);
  t.write("bad/a.xml", "<testsuite>\n  <testcase name='x'>\n  </testsuit>\n");
  auto bad = pto::parse_junit(pto::read_report(pto::collect_reports(t.str(), "bad/a.xml", 1 << 20, 10).files.at(0)), 0, false);
  CHECK(bad.error.rfind("bad/a.xml:3:", 0) == 0);
  // A billion laughs: the DOCTYPE is skipped, its entities stay unexpanded text.
  t.write("dtd/a.xml", "<?xml version='1.0'?><!DOCTYPE t [<!ENTITY a 'aaaaaaaaaa'><!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;'>]>"
                       "<testsuite><testcase name='x'><failure message='&b;'/></testcase></testsuite>");
  auto dtd = pto::parse_junit(pto::read_report(pto::collect_reports(t.str(), "dtd/a.xml", 1 << 20, 10).files.at(0)), 0, false);
  CHECK(dtd.error.empty());
  REQUIRE(dtd.cases.size() == 1);
  CHECK(dtd.cases[0].message.find("aaaaaaaaaa") == std::string::npos);
  // Links, on the way or as the report, and FIFOs: refused by name.
  fs::create_directories(t.path() / "links");
  fs::create_symlink("/etc/passwd", t.path() / "links/a.xml");
  CHECK(pto::collect_reports(t.str(), "links/*.xml", 1 << 20, 10).error == "links/a.xml is a symbolic link: reports are read without following links");
  fs::create_directory_symlink(t.path() / "r", t.path() / "via");
  CHECK(pto::collect_reports(t.str(), "via/ok.xml", 1 << 20, 10).error.find("via is a symbolic link") == 0);
  CHECK(pto::collect_reports(t.str(), "**/ok.xml", 1 << 20, 10).files.size() == 1);  // only r/ok.xml, not via/
  REQUIRE(sh("mkfifo " + (t.path() / "r/fifo.xml").string()) == 0);
  CHECK(pto::collect_reports(t.str(), "r/*.xml", 1 << 20, 10).error == "r/fifo.xml is a FIFO, not a report file");
  CHECK(pto::collect_reports(t.str(), "r/ok.xml", 10, 10).error.find("a report may hold at most 10") != std::string::npos);
  // Capped in all too, before a byte is read: two reports under the per-file cap, over the total.
  t.write("two/a.xml", std::string(600, ' '));
  t.write("two/b.xml", std::string(600, ' '));
  auto over = pto::collect_reports(t.str(), "two/*.xml", 1000, 10, 1000);
  CHECK(over.error == "the reports hold more than 1000 bytes in all (two/b.xml passes it; runner.yml tests.max-report-bytes)");
  CHECK(over.files.empty());
  CHECK(pto::collect_reports(t.str(), "two/*.xml", 1000, 10, 1200).files.size() == 2);
  // And in test cases: every case is judged and kept on the daemon's one thread.
  t.write("many/a.xml", "<testsuite><testcase name='a1'/><testcase name='a2'/><testcase name='a3'/></testsuite>");
  t.write("many/b.xml", "<testsuite><testcase name='b1'/><testcase name='b2'/><testcase name='b3'/></testsuite>");
  pto::ReportQuery q;
  q.base = t.str();
  q.pattern = "many/*.xml";
  q.max_cases = 6;
  CHECK(pto::read_junit_reports(q).cases.size() == 6);
  q.max_cases = 5;
  const auto too_many = pto::read_junit_reports(q);
  CHECK(too_many.error == "the reports name more than 5 test cases (many/b.xml passes it; runner.yml tests.max-cases)");
  CHECK(too_many.cases.empty());
  // The plugin's report of a process that died mid-test: read to its last case, the test it died in an error.
  pto::ReportFile cut{"p.xml", "<?xml version=\"1.0\"?>\n<testsuites>\n<testsuite name=\"pytest\">\n<pto-started name=\"t.py::a\"/>\n"
                               "<testcase classname=\"t.py\" name=\"a\" time=\"1\"></testcase>\n<pto-started name=\"t.py::b\"/>\n<testc"};
  auto died = pto::parse_junit(cut, 0, true);
  REQUIRE(died.error.empty());
  CHECK_FALSE(died.complete);
  REQUIRE(died.cases.size() == 2);
  CHECK(died.cases[1].id == "t.py::b");
  CHECK(died.cases[1].result == TestResult::Error);
}

TEST_CASE("test results: 60 pytest cases on 4 cards, card 2 breaking halfway and one real failure: 1 failed and card 2's victims, "
          "only those rerun on other cards, the victims pass there, card 2 charged once, and without the real failure the step is green",
          "[tests][daemon]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  for (bool real : {true, false}) {
    DYNAMIC_SECTION((real ? "with" : "without") << " the real failure") {
      Served s;
      s.devices = "0-5";
      write_suite(s.dir.path() / "suite", 60, real);
      write_project(s.dir, {{"st.yml", std::string("name: st\nsteps:\n  - name: system tests\n    devices: 4\n    tests: pytest\n"
                                                   "    run: ") + kPytest + " suite\n"}});
      s.dir.write("runner.yml", "health:\n  fault-patterns:\n    - {pattern: '507018', cause: card}\n");
      s.start();
      // As a workflow submits it: `submit --wait` inside GitHub Actions, with a step summary.
      const fs::path summary = s.dir.path() / "summary.md";
      CommandResult sub = run_cli({"submit", "--server", s.url(), "--job", "st", "--wait", "--poll-interval", "0.1"},
                                  {{"PTO_RUNNER_TOKEN", s.token}, {"GITHUB_ACTIONS", "true"}, {"GITHUB_STEP_SUMMARY", summary.string()}});
      const json runs = s.get(pto::api_path::kRuns)["runs"];
      REQUIRE(runs.size() == 1);
      const std::string id = runs[0]["id"];
      const json run = s.wait_run(id, 120);
      const json& step = step_of(run);
      INFO(step.dump(1).substr(0, 6000));
      const std::vector<json> first = cases_of(step, 1), second = cases_of(step, 2);
      REQUIRE(first.size() == 60);
      // The first attempt's failures: card 2's tests from the 30th on (the first broke it, the rest its victims)
      // and, with it, the real one.
      std::set<std::string> failed_first;
      std::string breaker;
      int victims = 0;
      for (const auto& c : first) {
        if (c["result"] == "passed") continue;
        failed_first.insert(c["id"].get<std::string>());
        if (c["result"] == "victim") {
          ++victims;
          CHECK(c["cards"] == json::array({2}));
          CHECK(c["cause"] == "card");
          breaker = c["victim_of"];
        }
      }
      CHECK(victims == 7);
      CHECK_FALSE(breaker.empty());
      CHECK(failed_first.size() == (real ? 9u : 8u));
      // The rerun ran exactly those, on cards other than 2.
      std::set<std::string> rerun;
      for (const auto& c : second) rerun.insert(c["id"].get<std::string>());
      CHECK(rerun == failed_first);
      REQUIRE(step["cards"].is_array());
      for (const auto& c : step["cards"]) CHECK(c != 2);
      for (const auto& c : second)
        if (c["id"] != "suite/test_suite.py::test_real") CHECK(c["result"] == "passed");
      CHECK(charges_of(s, 2, id) == 1);
      if (real) {
        CHECK(sub.exit_code == 1);
        // submit names the failed test, its cause, card and message, and annotates its file and line.
        CHECK(sub.out.find("FAILED suite/test_suite.py::test_real [code, card") != std::string::npos);
        CHECK(sub.out.find("::error title=suite/test_suite.py%3A%3Atest_real failed (code),file=suite/test_suite.py,line=") != std::string::npos);
        CHECK(read_file(summary).find("| `suite/test_suite.py::test_real` | code |") != std::string::npos);
        // The run's tests: the failed one alone with ?result=failed; the merged JUnit report with Surefire's rerun elements.
        const json failed = s.get(pto::api_path::run_tests(id) + "?result=failed");
        REQUIRE(failed["tests"].size() == 1);
        CHECK(failed["tests"][0]["step"] == "1-1");
        CHECK(s.get(pto::api_path::run_tests(id))["tests"].size() == 69);  // 60, then 9 rerun
        auto xml = pto::api_request("GET", s.url(pto::api_path::run_junit(id)));
        INFO(xml.error);
        INFO(read_file(s.proc.err).substr(0, 3000));
        REQUIRE(xml.status == 200);
        pugi::xml_document doc;
        REQUIRE(doc.load_string(xml.body.c_str()));
        pugi::xml_node suite = doc.child("testsuites").child("testsuite");
        CHECK(suite.attribute("tests").as_int() == 60);
        CHECK(suite.attribute("failures").as_int() == 1);
        int flaky = 0;
        for (auto tc : suite.children("testcase")) {
          const std::string name = tc.attribute("name").as_string();
          if (name == "test_real") {
            CHECK(tc.child("failure"));
            CHECK(tc.child("rerunFailure"));
            CHECK(std::string(tc.attribute("classname").as_string()) == "suite/test_suite.py");
          }
          flaky += tc.child("flakyFailure") ? 1 : 0;
        }
        CHECK(flaky == 8);  // card 2's breaker and its 7 victims failed, then passed elsewhere
        CHECK(step["state"] == "failed");
        CHECK(step["cause"] == "code");
        REQUIRE(step["tests"]["failed_tests"].size() == 1);
        const json& f = step["tests"]["failed_tests"][0];
        CHECK(f["id"] == "suite/test_suite.py::test_real");
        CHECK(f["message"].get<std::string>().find("the sum is wrong") != std::string::npos);
        CHECK(f["file"] == "suite/test_suite.py");
        CHECK(f["line"].is_number());
        CHECK(step["verdict"].get<std::string>().find("1 failed (suite/test_suite.py::test_real: AssertionError: the sum is wrong") !=
              std::string::npos);
        CHECK(step["verdict"].get<std::string>().find("7 victims of " + breaker + " on card 2, all passed on other cards") != std::string::npos);
      } else {
        CHECK(step["state"] == "succeeded");
        CHECK(step["verdict"].get<std::string>().rfind("passed: 7 victims of " + breaker + " on card 2, all passed on other cards", 0) == 0);
        CHECK(run["result"] == 0);
        CHECK(sub.exit_code == 0);
      }
    }
  }
}

TEST_CASE("test results: a step whose pytest collects no test is red 'ran no tests', green with allow-empty, two pytest calls in "
          "one step both report, a flaky test passes on its rerun", "[tests][daemon]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  Served s;
  fs::create_directories(s.dir.path() / "empty");
  std::ofstream(s.dir.path() / "empty/conftest.py") << "\n";
  fs::create_directories(s.dir.path() / "one");
  std::ofstream(s.dir.path() / "one/test_one.py") << "def test_a(): pass\ndef test_b(): pass\n";
  fs::create_directories(s.dir.path() / "two");
  std::ofstream(s.dir.path() / "two/test_two.py") << "def test_c(): pass\n";
  // Fails the first time it runs in this project, then passes: a flake.
  fs::create_directories(s.dir.path() / "flaky");
  std::ofstream(s.dir.path() / "flaky/test_flaky.py")
      << "import os\nMARK = os.path.join(os.path.dirname(__file__), 'ran-once')\n"
         "def test_steady(): pass\n"
         "def test_flaky():\n    first = not os.path.exists(MARK)\n    open(MARK, 'w').close()\n    assert not first, 'first time'\n";
  const std::string py = std::string(kPytest);
  write_project(s.dir, {{"empty.yml", "name: empty\nsteps:\n  - tests: pytest\n    run: " + py + " empty\n"},
                        {"allowed.yml", "name: allowed\nsteps:\n  - tests: {format: pytest, allow-empty: true}\n    run: " + py + " empty\n"},
                        {"twice.yml", "name: twice\nsteps:\n  - tests: pytest\n    run: " + py + " one && " + py + " two\n"},
                        {"flaky.yml", "name: flaky\nsteps:\n  - tests: pytest\n    run: " + py + " flaky\n"}});
  s.start();
  json empty = s.wait_run(s.submit_run({{"jobs", {"empty"}}}), 60);
  CHECK(step_of(empty)["state"] == "failed");
  CHECK(step_of(empty)["cause"] == "code");
  CHECK(step_of(empty)["error"].get<std::string>().rfind("ran no tests", 0) == 0);
  CHECK(step_of(empty)["attempt"] == 1);
  json allowed = s.wait_run(s.submit_run({{"jobs", {"allowed"}}}), 60);
  CHECK(step_of(allowed)["state"] == "succeeded");
  CHECK(step_of(allowed)["tests"]["ran"] == 0);
  json twice = s.wait_run(s.submit_run({{"jobs", {"twice"}}}), 60);
  CHECK(step_of(twice)["state"] == "succeeded");
  std::set<std::string> ids;
  for (const auto& c : step_of(twice)["tests"]["cases"]) ids.insert(c["id"].get<std::string>());
  CHECK(ids == std::set<std::string>{"one/test_one.py::test_a", "one/test_one.py::test_b", "two/test_two.py::test_c"});
  json flaky = s.wait_run(s.submit_run({{"jobs", {"flaky"}}}), 60);
  const json& fs_ = step_of(flaky);
  INFO(fs_.dump(1));
  CHECK(fs_["state"] == "succeeded");
  CHECK(fs_["cause"] == "flaky");
  CHECK(fs_["tests"]["flaky"] == 1);
  CHECK(cases_of(fs_, 2).size() == 1);  // only the flaky test ran again
  CHECK(fs_["verdict"].get<std::string>().find("1 flaky") != std::string::npos);
}

TEST_CASE("test results: a JUnit step (ctest --output-junit) reports, a malformed or linked report fails the step as its own "
          "(cause code, report refused) naming the file and line, and the daemon goes on", "[tests][daemon]") {
  Served s;
  const std::string ctest_dir = (s.dir.path() / "ct").string();
  fs::create_directories(ctest_dir);
  std::ofstream(ctest_dir + "/CMakeLists.txt") << "cmake_minimum_required(VERSION 3.16)\nproject(t NONE)\nenable_testing()\n"
                                                  "add_test(NAME adds COMMAND true)\nadd_test(NAME breaks COMMAND false)\n";
  write_project(s.dir, {{"ct.yml", "name: ct\nsteps:\n  - tests: {junit: 'ct/build/junit.xml'}\n    run: cd ct && cmake -S . -B build >/dev/null && "
                                   "ctest --test-dir build --output-junit junit.xml >/dev/null || true\n"},
                        {"bad.yml", "name: bad\nsteps:\n  - tests: {junit: 'out/*.xml'}\n    run: mkdir -p out && printf '<testsuite>\\n<testcase>\\n' > out/r.xml\n"},
                        {"link.yml", "name: link\nsteps:\n  - tests: {junit: 'out2/*.xml'}\n    run: mkdir -p out2 && ln -sf /etc/shadow out2/r.xml\n"}});
  s.start();
  json ct = s.wait_run(s.submit_run({{"jobs", {"ct"}}}), 60);
  const json& cs = step_of(ct);
  INFO(cs.dump(1));
  std::map<std::string, std::string> results;
  for (const auto& c : cs["tests"]["cases"]) results[c["id"]] = c["result"];
  CHECK(results == std::map<std::string, std::string>{{"adds::adds", "passed"}, {"breaks::breaks", "failed"}});
  json bad = s.wait_run(s.submit_run({{"jobs", {"bad"}}}), 60);
  CHECK(step_of(bad)["state"] == "failed");
  CHECK(step_of(bad)["cause"] == "code");  // a pull request's report never counts as the host's failure
  CHECK(step_of(bad)["verdict"].get<std::string>().find("report refused: out/r.xml:2:11") != std::string::npos);
  CHECK(step_of(bad)["tests"]["error"] == "out/r.xml:2:11: not a JUnit XML report (Start-end tags mismatch)");
  CHECK(step_of(bad)["attempt"] == 1);  // a report that cannot be read would be refused again
  json link = s.wait_run(s.submit_run({{"jobs", {"link"}}}), 60);
  CHECK(step_of(link)["state"] == "failed");
  CHECK(step_of(link)["tests"]["error"] == "out2/r.xml is a symbolic link: reports are read without following links");
  CHECK(step_of(link)["cause"] == "code");
  CHECK(pto::api_request("GET", s.url(pto::api_path::kHealthz)).status == 200);
  // No infra failure counted for on-call's alert: neither refusal was the host's.
  CHECK(pto::api_request("GET", s.url(pto::api_path::kMetrics)).body.find("pto_runner_failures_total{cause=\"infra\"} 1") == std::string::npos);
}

TEST_CASE("test results: junit.xml out of the API is XML 1.0 whatever the tests' names and messages hold (ESC, control "
          "characters, a CDATA end, bytes that are not UTF-8)", "[tests][daemon]") {
  Served s;
  // The step's report carries them raw; pugixml reads them (it does not judge characters), so they reach the run.
  write_project(s.dir, {{"odd.yml", "name: odd\nsteps:\n  - tests: {junit: 'out/*.xml'}\n    run: |\n"
                                    "      mkdir -p out\n"
                                    "      printf '<testsuite><testcase classname=\"c\" name=\"esc\\033name ]]> \\377x\">"
                                    "<failure message=\"bell \\007 nul-adjacent \\001 ]]&gt; \\376\\377 end\">trace \\033[31m ]]&gt;</failure>"
                                    "</testcase><testcase classname=\"c\" name=\"plain\"/></testsuite>' > out/r.xml\n"
                                    "      exit 1\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"odd"}}});
  const json run = s.wait_run(id, 60);
  INFO(run.dump(2));
  REQUIRE(step_of(run)["tests"]["cases"].size() == 2);
  const auto junit = pto::api_request("GET", s.url(pto::api_path::run_junit(id)));
  REQUIRE(junit.status == 200);
  const fs::path saved = s.dir.path() / "junit.xml";
  std::ofstream(saved, std::ios::binary) << junit.body;
  // A strict parser (expat, through Python's xml.etree) reads the whole report.
  std::string parsed;
  CHECK(sh("/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
           "print(len(r.findall(\".//testcase\")), r.find(\".//failure\").get(\"message\"))' " + saved.string() + " 2>&1",
           &parsed) == 0);
  INFO(parsed);
  CHECK(parsed.rfind("2 bell \xEF\xBF\xBD nul-adjacent \xEF\xBF\xBD ]]> \xEF\xBF\xBD\xEF\xBF\xBD end", 0) == 0);
  CHECK(junit.body.find("&#27;") == std::string::npos);
  CHECK(junit.body.find('\x1b') == std::string::npos);
  // The run's JSON keeps them as the report said (as JSON escapes), for the pages to show as text.
  CHECK(run.dump().find("esc\\u001bname ]]>") != std::string::npos);
  const auto tests = pto::api_request("GET", s.url(pto::api_path::run_tests(id)));
  REQUIRE(tests.status == 200);
  CHECK(json::parse(tests.body)["tests"][0]["id"].get<std::string>().find("esc\x1bname ]]>") != std::string::npos);
  // And the pages (the run page, /tests) put every text in as text: none of their scripts parses data as HTML.
  for (const auto& f : fs::directory_iterator(source_dir() / "runner/server")) {
    if (f.path().filename().string().find("page") == std::string::npos) continue;
    const std::string src = read_file(f.path());
    INFO(f.path());
    for (const char* html : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"}) CHECK(src.find(html) == std::string::npos);
  }
}

TEST_CASE("test results: a card a test leases through task-submit (PYTEST_CURRENT_TEST) is that test's, so a fault on it makes the "
          "later failures on that card its victims", "[tests][daemon][lease]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  Served s;
  TempDir bin;
  fs::create_symlink(PTO_RUNNER_BIN, bin.path() / "task-submit");
  s.env = {{"PATH", bin.str() + ":" + std::getenv("PATH")}};
  s.devices = "0-3";
  // Each test borrows the card of its index (as pypto's --execute-via-task-submit batches do); card 1 is
  // broken: its leases print the fault and fail, and pytest sees the failure with no card in its message.
  fs::create_directories(s.dir.path() / "leased");
  std::ofstream(s.dir.path() / "leased/test_leased.py")
      << "import subprocess, pytest\n"
         "@pytest.mark.parametrize('n', range(8))\n"
         "def test_batch(n):\n"
         "    card = n % 4\n"
         "    run = 'echo aclrtSynchronizeStream failed: 507018; exit 1' if card == 1 else 'true'\n"
         "    r = subprocess.run(['task-submit', '--device', str(card), '--run', run], capture_output=True, text=True)\n"
         "    assert r.returncode == 0, 'the batch failed'\n";
  write_project(s.dir, {{"leased.yml", std::string("name: leased\nsteps:\n  - tests: pytest\n    retry: {max: 0}\n    run: ") + kPytest + " leased\n"}});
  s.dir.write("runner.yml", "health:\n  fault-patterns:\n    - {pattern: '507018', cause: card}\n");
  s.start();
  const json run = s.wait_run(s.submit_run({{"jobs", {"leased"}}}), 60);
  const json& step = step_of(run);
  INFO(step.dump(1).substr(0, 5000));
  std::map<std::string, json> cases;
  for (const auto& c : step["tests"]["cases"]) cases[c["id"]] = c;
  CHECK(cases["leased/test_leased.py::test_batch[0]"]["cards"] == json::array({0}));
  CHECK(cases["leased/test_leased.py::test_batch[1]"]["cards"] == json::array({1}));
  CHECK(cases["leased/test_leased.py::test_batch[1]"]["result"] == "failed");
  CHECK(cases["leased/test_leased.py::test_batch[1]"]["cause"] == "card");  // its lease said the card broke
  CHECK(cases["leased/test_leased.py::test_batch[5]"]["result"] == "victim");
  CHECK(cases["leased/test_leased.py::test_batch[5]"]["victim_of"] == "leased/test_leased.py::test_batch[1]");
  CHECK(step["cause"] == "card");
}

TEST_CASE("test results: under the sandbox, a step's pytest reports as the run's user, cannot change the plugin, and a report it "
          "links to a root-only file is refused unread", "[tests][daemon][sandbox]") {
  SKIP_UNLESS_ROOT();
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  Served s;
  open_to_sandbox(s.dir);
  SandboxUsers users(s.dir, 1);
  const fs::path secret = s.dir.write("root-only.xml", "<testsuite><testcase classname='secret' name='root-only-content'/></testsuite>");
  ::chmod(secret.c_str(), 0600);
  fs::create_directories(s.dir.path() / "suite");
  std::ofstream(s.dir.path() / "suite/test_s.py") << "import os\ndef test_who(): assert os.getuid() != 0\ndef test_b(): pass\n";
  fs::permissions(s.dir.path() / "suite", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                              fs::perms::others_read | fs::perms::others_exec);
  write_project(s.dir, {{"own.yml", std::string("name: own\nsteps:\n  - tests: pytest\n    run: |\n      ") + kPytest +
                                        " suite\n      (echo tamper >> \"${PYTHONPATH%%:*}/pto_runner_pytest.py\") 2>/dev/null && echo TAMPERED || echo refused-plugin\n"},
                        {"link.yml", "name: link\nsteps:\n  - tests: pytest\n    run: ln -s " + secret.string() + " \"$PTO_RUNNER_TESTS_DIR/pytest-1-0.xml\"\n"}});
  s.start();
  const json own = s.wait_run(s.submit_run({{"jobs", {"own"}}}), 90);
  INFO(own.dump(1).substr(0, 4000));
  CHECK(step_of(own)["state"] == "succeeded");
  CHECK(step_of(own)["tests"]["passed"] == 2);  // test_who ran as the sandbox user, not root
  const std::string log = read_file(step_of(own)["log_path"].get<std::string>());
  CHECK(log.find("refused-plugin") != std::string::npos);
  CHECK(log.find("TAMPERED") == std::string::npos);
  const json link = s.wait_run(s.submit_run({{"jobs", {"link"}}}), 60);
  CHECK(step_of(link)["state"] == "failed");
  CHECK(step_of(link)["tests"]["error"] == "pytest-1-0.xml is a symbolic link: reports are read without following links");
  CHECK(link.dump().find("root-only-content") == std::string::npos);
}

namespace {

/// The daemon's peak resident memory so far (VmHWM), in KiB.
long peak_rss_kib(int pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

TEST_CASE("test results: a step's 2 GiB of sparse reports, each under the per-file cap, are refused whole before a byte is "
          "read: the step fails as its own (code, report refused), the daemon's peak memory barely moves, /healthz answers "
          "throughout", "[tests][daemon]") {
  Served s;
  write_project(s.dir, {{"big.yml", "name: big\nsteps:\n  - tests: {junit: 'out/*.xml'}\n    run: |\n"
                                    "      mkdir -p out\n"
                                    "      for i in $(seq 1 32); do truncate -s 63M out/r$i.xml; done\n"}});
  s.start();
  const long before = peak_rss_kib(s.proc.pid);
  REQUIRE(before > 0);
  const std::string id = s.submit_run({{"jobs", {"big"}}});
  int answered = 0, asked = 0;
  json run;
  REQUIRE(wait_until([&] {
    ++asked;
    answered += pto::api_request("GET", s.url(pto::api_path::kHealthz), "", "", 5).status == 200;
    run = s.get(pto::api_path::run(id));
    return run["state"] != "running";
  }, 60));
  INFO(run.dump(2));
  CHECK(answered == asked);
  CHECK(step_of(run)["state"] == "failed");
  CHECK(step_of(run)["cause"] == "code");
  CHECK(step_of(run)["verdict"].get<std::string>().find("report refused: the reports hold more than 268435456 bytes in all") !=
        std::string::npos);
  // Nothing of them was read into the daemon: its peak grew by far less than one report.
  CHECK(peak_rss_kib(s.proc.pid) - before < 100 * 1024);
}
