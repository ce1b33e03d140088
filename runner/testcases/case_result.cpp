#include "testcases/case_result.h"

namespace pto {

std::string to_string(TestResult r) {
  switch (r) {
    case TestResult::Passed: return "passed";
    case TestResult::Failed: return "failed";
    case TestResult::Error: return "error";
    case TestResult::Skipped: return "skipped";
    case TestResult::Muted: return "muted";
    case TestResult::Victim: return "victim";
  }
  return "passed";
}

std::optional<TestResult> test_result_named(const std::string& s) {
  for (TestResult r : {TestResult::Passed, TestResult::Failed, TestResult::Error, TestResult::Skipped, TestResult::Muted, TestResult::Victim})
    if (to_string(r) == s) return r;
  return std::nullopt;
}

nlohmann::json TestCase::json() const {
  nlohmann::json j = {{"id", id},           {"result", to_string(result)}, {"duration", duration}, {"cards", cards},
                      {"attempt", attempt}, {"cause", cause ? nlohmann::json(to_string(*cause)) : nlohmann::json(nullptr)}};
  j["message"] = message.empty() ? nlohmann::json(nullptr) : nlohmann::json(message);
  j["file"] = file.empty() ? nlohmann::json(nullptr) : nlohmann::json(file);
  j["line"] = line > 0 ? nlohmann::json(line) : nlohmann::json(nullptr);
  if (!victim_of.empty()) j["victim_of"] = victim_of;
  if (!card_fault.empty()) j["card_fault"] = card_fault;
  if (!muted.empty()) j["muted"] = muted;
  return j;
}

}  // namespace pto
