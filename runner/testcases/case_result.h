#pragma once
// One test case of a step's attempt, as its report said and as pto-runner judged it (SPEC "Test results").
// Value types only: testcases/junit_reader reads them, testcases/verdict judges them, the engine keeps
// them in the step's record, report/ and server/ render them.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/failure_cause.h"

namespace pto {

enum class TestResult { Passed, Failed, Error, Skipped, Muted, Victim };

std::string to_string(TestResult r);
std::optional<TestResult> test_result_named(const std::string& s);
/// Failed, error and victim: what makes a step red unless accounted for.
inline bool is_failure(TestResult r) { return r == TestResult::Failed || r == TestResult::Error || r == TestResult::Victim; }

struct TestCase {
  std::string id;  // pytest's node id; JUnit classname::name
  TestResult result = TestResult::Passed;
  double duration = 0;  // seconds
  std::vector<int> cards;
  int attempt = 1;
  /// code or card, for a failure (a victim's is card); flaky once it passed on a rerun; none for a pass.
  std::optional<FailureCause> cause;
  std::string message;  // the first lines of its failure, error or skip message
  std::string output;   // the end of its captured output and traceback (failures only, capped)
  std::string file;
  int line = 0;
  int process = 0;       // which report (one per pytest process) it came from: victims are of one process
  std::string victim_of;  // for a victim: the test whose card fault it followed
  std::string card_fault;  // for the test that broke its card: the line that says so
  std::string muted;       // for a muted failure: the mute's reason and its end
  /// The one encoding of a test case. What the API and the pages show: without `output` and `process`
  /// (the daemon's own); `kept`: with them, as the journal keeps a step's cases across a restart.
  nlohmann::json json(bool kept = false) const;
  /// The one decoding, of either form (and of an earlier daemon's journal: "" or 0 where null is now);
  /// what is missing or of the wrong type is left at its default.
  static TestCase from_json(const nlohmann::json& j);
};

}  // namespace pto
