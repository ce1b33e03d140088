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

nlohmann::json TestCase::json(bool kept) const {
  nlohmann::json j = {{"id", id},           {"result", to_string(result)}, {"duration", duration}, {"cards", cards},
                      {"attempt", attempt}, {"cause", cause ? nlohmann::json(to_string(*cause)) : nlohmann::json(nullptr)}};
  j["message"] = message.empty() ? nlohmann::json(nullptr) : nlohmann::json(message);
  j["file"] = file.empty() ? nlohmann::json(nullptr) : nlohmann::json(file);
  j["line"] = line > 0 ? nlohmann::json(line) : nlohmann::json(nullptr);
  if (!victim_of.empty()) j["victim_of"] = victim_of;
  if (!card_fault.empty()) j["card_fault"] = card_fault;
  if (!muted.empty()) j["muted"] = muted;
  if (kept) {
    if (!output.empty()) j["output"] = output;
    if (process) j["process"] = process;
  }
  return j;
}

namespace {
template <typename T>
T field(const nlohmann::json& j, const char* key, T fallback) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}
}  // namespace

TestCase TestCase::from_json(const nlohmann::json& j) {
  TestCase c;
  c.id = field<std::string>(j, "id", "");
  c.result = test_result_named(field<std::string>(j, "result", "passed")).value_or(TestResult::Passed);
  c.duration = field<double>(j, "duration", 0);
  c.cards = field<std::vector<int>>(j, "cards", {});
  c.attempt = field<int>(j, "attempt", 1);
  if (const std::string cause = field<std::string>(j, "cause", ""); !cause.empty()) c.cause = failure_cause_named(cause);
  c.message = field<std::string>(j, "message", "");
  c.output = field<std::string>(j, "output", "");
  c.file = field<std::string>(j, "file", "");
  c.line = field<int>(j, "line", 0);
  c.process = field<int>(j, "process", 0);
  c.victim_of = field<std::string>(j, "victim_of", "");
  c.card_fault = field<std::string>(j, "card_fault", "");
  c.muted = field<std::string>(j, "muted", "");
  return c;
}

}  // namespace pto
