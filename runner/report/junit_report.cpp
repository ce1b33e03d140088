#include "report/junit_report.h"

#include <pugixml.hpp>

#include <cstdint>
#include <map>
#include <sstream>
#include <vector>

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

bool failed(const std::string& result) { return result == "failed" || result == "error" || result == "victim"; }

void failure_element(pugi::xml_node tc, const char* tag, const nlohmann::json& c) {
  pugi::xml_node f = tc.append_child(tag);
  const std::string message = str(c, "message");
  f.append_attribute("message") = message.c_str();
  const std::string result = str(c, "result");
  f.append_attribute("type") = (result == "victim" ? "victim of " + str(c, "victim_of") : str(c, "cause")).c_str();
  std::string body = "attempt " + std::to_string(c.value("attempt", 1)) + " on cards " + c.value("cards", nlohmann::json::array()).dump();
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
      std::vector<std::string> order;
      std::map<std::string, std::vector<const nlohmann::json*>> attempts;
      const nlohmann::json cases = step["tests"].value("cases", nlohmann::json::array());  // outlives the pointers below
      for (const auto& c : cases) {
        const std::string id = str(c, "id");
        if (!attempts.count(id)) order.push_back(id);
        attempts[id].push_back(&c);
      }
      pugi::xml_node suite = suites.append_child("testsuite");
      suite.append_attribute("name") = (str(job, "id") + " / " + str(step, "name")).c_str();
      int tests = 0, failures = 0, errors = 0, skipped = 0;
      double time = 0;
      for (const std::string& id : order) {
        const auto& list = attempts[id];
        const nlohmann::json& last = *list.back();
        const std::string result = str(last, "result");
        const std::size_t sep = id.find("::");
        pugi::xml_node tc = suite.append_child("testcase");
        tc.append_attribute("classname") = (sep == std::string::npos ? id : id.substr(0, sep)).c_str();
        tc.append_attribute("name") = (sep == std::string::npos ? id : id.substr(sep + 2)).c_str();
        tc.append_attribute("time") = last.value("duration", 0.0);
        if (!str(last, "file").empty()) tc.append_attribute("file") = str(last, "file").c_str();
        if (last.contains("line") && last["line"].is_number_integer()) tc.append_attribute("line") = last["line"].get<int>();
        time += last.value("duration", 0.0);
        ++tests;
        if (result == "skipped" || result == "muted") {
          // A muted failure is reported as skipped (it made nothing red), saying so and what it said.
          const std::string message = result == "muted" ? "muted (" + str(last, "muted") + "): " + str(last, "message") : str(last, "message");
          tc.append_child("skipped").append_attribute("message") = message.c_str();
          ++skipped;
        } else if (failed(result)) {
          failure_element(tc, result == "error" ? "error" : "failure", last);
          ++(result == "error" ? errors : failures);
          for (std::size_t i = 0; i + 1 < list.size(); ++i)
            if (failed(str(*list[i], "result"))) failure_element(tc, "rerunFailure", *list[i]);
        } else {
          for (std::size_t i = 0; i + 1 < list.size(); ++i)
            if (failed(str(*list[i], "result"))) failure_element(tc, "flakyFailure", *list[i]);
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
      for (const auto& c : step["tests"].value(failed_only ? "failed_tests" : "cases", nlohmann::json::array())) {
        nlohmann::json e = c;
        e["step"] = str(step, "id");
        e["step_label"] = str(step, "label");
        out.push_back(std::move(e));
      }
    }
  return {{"run", str(run, "id")}, {"tests", std::move(out)}};
}

}  // namespace pto
