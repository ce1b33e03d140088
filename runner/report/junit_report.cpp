#include "report/junit_report.h"

#include <pugixml.hpp>

#include <cstdint>
#include <map>
#include <sstream>
#include <vector>

#include "testcases/case_result.h"

namespace pto {

namespace {

/// `text` as XML 1.0 may carry it: what a test named or printed is a pull request's (any bytes). Characters
/// XML 1.0 forbids (C0 controls but tab, LF and CR; U+FFFE, U+FFFF; surrogates) and bytes that are not UTF-8
/// become U+FFFD. Never a character reference: `&#27;` is as forbidden as the character (XML 1.0, 4.1 WFC
/// Legal Character), and a strict parser rejects the whole report for it.
std::string xml_text(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += static_cast<char>(c);
      else out += kReplacement;
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then every continuation byte and the code point checked.
    std::size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (c >= 0xF5) len = 0;
    std::uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    bool ok = len != 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) && !(cp >= 0xD800 && cp <= 0xDFFF) &&
         cp != 0xFFFE && cp != 0xFFFF;
    if (ok) out.append(text, i, len);
    else out += kReplacement;
    i += ok ? len : 1;
  }
  return out;
}

std::string str(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? xml_text(j[key].get<std::string>()) : "";
}

/// A step's test cases as the run's JSON carries them, decoded the one way (testcases/case_result).
std::vector<TestCase> cases_of(const nlohmann::json& step) {
  std::vector<TestCase> out;
  for (const auto& c : step["tests"].value("cases", nlohmann::json::array())) out.push_back(TestCase::from_json(c));
  return out;
}

void failure_element(pugi::xml_node tc, const char* tag, const TestCase& c) {
  pugi::xml_node f = tc.append_child(tag);
  const std::string message = xml_text(c.message);
  f.append_attribute("message") = message.c_str();
  f.append_attribute("type") = xml_text(c.result == TestResult::Victim ? "victim of " + c.victim_of : c.cause ? to_string(*c.cause) : "").c_str();
  std::string body = "attempt " + std::to_string(c.attempt) + " on cards " + nlohmann::json(c.cards).dump();
  if (!message.empty()) body += "\n" + message;
  f.text() = body.c_str();
}

}  // namespace

std::string junit_report(const nlohmann::json& run) {
  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  pugi::xml_node suites = doc.append_child("testsuites");
  suites.append_attribute("name") = ("pto-runner run " + str(run, "id")).c_str();  // str(): every text made XML 1.0
  int all_tests = 0, all_failures = 0, all_errors = 0, all_skipped = 0;
  for (const auto& job : run.value("jobs", nlohmann::json::array()))
    for (const auto& step : job.value("steps", nlohmann::json::array())) {
      if (!step.contains("tests") || !step["tests"].is_object()) continue;
      // Each test's attempts, in the order the tests first ran.
      const std::vector<TestCase> cases = cases_of(step);
      std::vector<std::string> order;
      std::map<std::string, std::vector<const TestCase*>> attempts;
      for (const TestCase& c : cases) {
        if (!attempts.count(c.id)) order.push_back(c.id);
        attempts[c.id].push_back(&c);
      }
      pugi::xml_node suite = suites.append_child("testsuite");
      suite.append_attribute("name") = (str(job, "id") + " / " + str(step, "name")).c_str();
      int tests = 0, failures = 0, errors = 0, skipped = 0;
      double time = 0;
      for (const std::string& raw_id : order) {
        const auto& list = attempts[raw_id];
        const TestCase& last = *list.back();
        const std::string id = xml_text(raw_id);
        const std::size_t sep = id.find("::");
        pugi::xml_node tc = suite.append_child("testcase");
        tc.append_attribute("classname") = (sep == std::string::npos ? id : id.substr(0, sep)).c_str();
        tc.append_attribute("name") = (sep == std::string::npos ? id : id.substr(sep + 2)).c_str();
        tc.append_attribute("time") = last.duration;
        if (!last.file.empty()) tc.append_attribute("file") = xml_text(last.file).c_str();
        if (last.line > 0) tc.append_attribute("line") = last.line;
        time += last.duration;
        ++tests;
        if (last.result == TestResult::Skipped || last.result == TestResult::Muted) {
          // A muted failure is reported as skipped (it made nothing red), saying so and what it said.
          const std::string message = last.result == TestResult::Muted ? "muted (" + last.muted + "): " + last.message : last.message;
          tc.append_child("skipped").append_attribute("message") = xml_text(message).c_str();
          ++skipped;
        } else if (is_failure(last.result)) {
          const bool error = last.result == TestResult::Error;
          failure_element(tc, error ? "error" : "failure", last);
          ++(error ? errors : failures);
          for (std::size_t i = 0; i + 1 < list.size(); ++i)
            if (is_failure(list[i]->result)) failure_element(tc, "rerunFailure", *list[i]);
        } else {
          for (std::size_t i = 0; i + 1 < list.size(); ++i)
            if (is_failure(list[i]->result)) failure_element(tc, "flakyFailure", *list[i]);
        }
      }
      suite.append_attribute("tests") = tests;
      suite.append_attribute("failures") = failures;
      suite.append_attribute("errors") = errors;
      suite.append_attribute("skipped") = skipped;
      suite.append_attribute("time") = time;
      all_tests += tests, all_failures += failures, all_errors += errors, all_skipped += skipped;
    }
  suites.append_attribute("tests") = all_tests;
  suites.append_attribute("failures") = all_failures;
  suites.append_attribute("errors") = all_errors;
  suites.append_attribute("skipped") = all_skipped;
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
  return out.str();
}

nlohmann::json run_tests_json(const nlohmann::json& run, bool failed_only) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& job : run.value("jobs", nlohmann::json::array()))
    for (const auto& step : job.value("steps", nlohmann::json::array())) {
      if (!step.contains("tests") || !step["tests"].is_object()) continue;
      for (const auto& raw : step["tests"].value(failed_only ? "failed_tests" : "cases", nlohmann::json::array())) {
        nlohmann::json e = TestCase::from_json(raw).json();  // one decoding, one encoding
        if (raw.contains("log") && raw["log"].is_string()) e["log"] = raw["log"];  // a failed test's link to its step's log
        e["step"] = str(step, "id");
        e["step_label"] = str(step, "label");
        out.push_back(std::move(e));
      }
    }
  return {{"run", str(run, "id")}, {"tests", std::move(out)}};
}

}  // namespace pto
