// A test case's one encoding and one decoding (testcases/case_result): what the journal keeps comes back whole,
// what the API shows leaves the daemon's own fields out, and an earlier daemon's journal still reads.
#include <catch2/catch.hpp>

#include "report/junit_report.h"
#include "testcases/case_result.h"

using namespace pto;

TEST_CASE("test case: kept and read back whole, shown without output, an earlier journal's form read, junit made from the typed cases", "[testcases]") {
  TestCase c;
  c.id = "tests/st/test_x.py::test_y[a]";
  c.result = TestResult::Victim;
  c.duration = 1.5;
  c.cards = {2, 3};
  c.attempt = 2;
  c.cause = FailureCause::Card;
  c.message = "device fault";
  c.output = "Traceback ...";
  c.file = "tests/st/test_x.py";
  c.line = 12;
  c.process = 4;
  c.victim_of = "tests/st/test_x.py::test_w";
  const TestCase back = TestCase::from_json(c.json(true));
  CHECK(back.json(true) == c.json(true));
  CHECK(back.output == "Traceback ...");
  CHECK(back.process == 4);
  const nlohmann::json shown = c.json();
  CHECK_FALSE(shown.contains("output"));
  CHECK_FALSE(shown.contains("process"));
  // An earlier daemon kept "" and 0 where the encoding now writes null: read the same.
  const TestCase old = TestCase::from_json({{"id", "a::b"}, {"result", "failed"}, {"message", ""}, {"file", ""}, {"line", 0},
                                            {"cause", "code"}, {"victim_of", ""}, {"muted", ""}});
  CHECK(old.result == TestResult::Failed);
  CHECK(old.cause == FailureCause::Code);
  CHECK(old.line == 0);
  CHECK(TestCase::from_json(old.json(true)).json(true) == old.json(true));
  // Garbage is defaults, never a throw.
  CHECK(TestCase::from_json({{"id", 5}, {"result", "weird"}, {"cards", "x"}}).result == TestResult::Passed);

  // junit.xml from the run's JSON: the victim at its last attempt is a failure typed by what it followed, and
  // its failed first attempt a rerunFailure under it.
  TestCase first = c;
  first.attempt = 1;
  first.result = TestResult::Failed;
  first.cause = FailureCause::Code;
  const nlohmann::json run = {{"id", "r"},
                              {"jobs", {{{"id", "j"}, {"steps", {{{"name", "s"}, {"tests", {{"cases", {first.json(), c.json()}}}}}}}}}}};
  const std::string xml = junit_report(run);
  CHECK(xml.find("<failure message=\"device fault\" type=\"victim of tests/st/test_x.py::test_w\">") != std::string::npos);
  CHECK(xml.find("<rerunFailure message=\"device fault\" type=\"code\">") != std::string::npos);
  CHECK(xml.find("name=\"test_y[a]\"") != std::string::npos);
}
