#include "testcases/junit_reader.h"

#include <pugixml.hpp>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace pto {

namespace {

constexpr std::size_t kMaxOutput = 64 * 1024;
constexpr std::size_t kKeptTail = 4 * 1024;  // of a failed test's output past the attempt's budget
constexpr std::size_t kMaxMessageLines = 5, kMaxMessage = 1000;

std::string first_lines(std::string_view text) {
  std::string out;
  std::size_t lines = 0, at = 0;
  while (at < text.size() && lines < kMaxMessageLines && out.size() < kMaxMessage) {
    std::size_t nl = text.find('\n', at);
    std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() && out.empty()) continue;
    out += (out.empty() ? "" : "\n") + std::string(line);
    ++lines;
  }
  return out.substr(0, kMaxMessage);
}

std::vector<int> card_list(const char* text) {
  std::vector<int> cards;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (end != item.c_str() && *end == '\0' && v >= 0 && v < 4096) cards.push_back(static_cast<int>(v));
  }
  return cards;
}

TestCase read_case(const pugi::xml_node& tc, int process) {
  TestCase c;
  const std::string cls = tc.attribute("classname").as_string(), name = tc.attribute("name").as_string();
  c.id = cls.empty() ? name : name.empty() ? cls : cls + "::" + name;
  c.duration = std::max(0.0, tc.attribute("time").as_double(0));
  c.file = tc.attribute("file").as_string();
  c.line = tc.attribute("line").as_int(0);
  c.process = process;
  for (const auto& p : tc.child("properties").children("property"))
    if (std::strcmp(p.attribute("name").as_string(), "pto.cards") == 0) c.cards = card_list(p.attribute("value").as_string());
  std::string output;
  auto take = [&](const pugi::xml_node& n, TestResult r) {
    c.result = r;
    const std::string message = n.attribute("message").as_string();
    const std::string body = n.text().as_string();
    c.message = first_lines(message.empty() ? body : message);
    if (c.message.empty()) c.message = n.attribute("type").as_string();
    output += body;
  };
  if (auto f = tc.child("failure")) take(f, TestResult::Failed);
  else if (auto e = tc.child("error")) take(e, TestResult::Error);
  else if (auto s = tc.child("skipped")) take(s, TestResult::Skipped);
  if (is_failure(c.result)) {
    for (const char* stream : {"system-out", "system-err"})
      if (auto n = tc.child(stream)) output += std::string("\n") + n.text().as_string();
    c.output = output.size() > kMaxOutput ? output.substr(output.size() - kMaxOutput) : output;
  }
  return c;
}

// Line and column of a byte offset, for a person's editor.
std::string where(const std::string& text, std::ptrdiff_t offset) {
  std::size_t line = 1, col = 1;
  for (std::ptrdiff_t i = 0; i < offset && i < static_cast<std::ptrdiff_t>(text.size()); ++i) {
    if (text[static_cast<std::size_t>(i)] == '\n') ++line, col = 1;
    else ++col;
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace

ParsedReport parse_junit(const ReportFile& report, int process, bool from_plugin) {
  ParsedReport out;
  const std::string& text = report.text;
  pugi::xml_document doc;
  // A DOCTYPE is skipped, never processed: the entities it declares are not expanded (pugixml expands only
  // XML's five and character references).
  const unsigned options = pugi::parse_default & ~pugi::parse_doctype;
  pugi::xml_parse_result r = doc.load_buffer(text.data(), text.size(), options, pugi::encoding_utf8);
  if (!r && from_plugin && text.find("</testsuites>") == std::string::npos) {
    // A process that died: its report up to the last complete line, closed as the plugin would have.
    std::string cut = text.substr(0, text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    cut += "</testsuite>\n</testsuites>\n";
    pugi::xml_document again;
    if (pugi::xml_parse_result r2 = again.load_buffer(cut.data(), cut.size(), options, pugi::encoding_utf8)) {
      doc.reset(again);
      r = r2;
      out.complete = false;
    }
  }
  if (!r) {
    out.error = report.path + ":" + where(text, r.offset) + ": not a JUnit XML report (" + r.description() + ")";
    return out;
  }
  if (!doc.document_element() || (std::strcmp(doc.document_element().name(), "testsuites") != 0 &&
                                  std::strcmp(doc.document_element().name(), "testsuite") != 0)) {
    out.error = report.path + ":1:1: not a JUnit XML report (its root element is <" +
                std::string(doc.document_element() ? doc.document_element().name() : "") + ">, not <testsuites> or <testsuite>)";
    return out;
  }
  std::string started;  // the plugin's last <pto-started/> not yet followed by its case
  struct Walker : pugi::xml_tree_walker {
    ParsedReport& out;
    std::string& started;
    int process;
    Walker(ParsedReport& o, std::string& s, int p) : out(o), started(s), process(p) {}
    bool for_each(pugi::xml_node& n) override {
      if (n.type() != pugi::node_element) return true;
      if (std::strcmp(n.name(), "pto-started") == 0) started = n.attribute("name").as_string();
      else if (std::strcmp(n.name(), "testcase") == 0) {
        out.cases.push_back(read_case(n, process));
        if (out.cases.back().id == started) started.clear();
      }
      return true;
    }
  } walker(out, started, process);
  doc.traverse(walker);
  if (!out.complete && !started.empty()) {
    TestCase c;
    c.id = started;
    c.result = TestResult::Error;
    c.process = process;
    c.message = "the pytest process ended during this test (killed, crashed or hung), before its report was complete";
    out.cases.push_back(std::move(c));
  }
  return out;
}

ParsedReports read_junit_reports(const ReportQuery& q) {
  ParsedReports out;
  CollectedReports found = collect_reports(q.base, q.pattern, q.max_bytes, q.max_files, q.max_total_bytes);
  out.error = found.error;
  // One report in memory at a time: read, parsed, dropped. What failed tests printed is kept whole (64 KiB
  // each) up to q.max_output_bytes in all, then only its last lines, where a card's fault is said.
  std::size_t output = 0;
  for (std::size_t i = 0; i < found.files.size() && out.error.empty(); ++i) {
    ParsedReport r = parse_junit(read_report(found.files[i]), static_cast<int>(i), q.from_plugin);
    out.error = r.error;
    if (out.error.empty() && out.cases.size() + r.cases.size() > q.max_cases)
      out.error = "the reports name more than " + std::to_string(q.max_cases) + " test cases (" + found.files[i].path +
                  " passes it; runner.yml tests.max-cases)";
    for (TestCase& c : r.cases) {
      if (output + c.output.size() > q.max_output_bytes && c.output.size() > kKeptTail) c.output.erase(0, c.output.size() - kKeptTail);
      output += c.output.size();
      out.cases.push_back(std::move(c));
    }
  }
  if (!out.error.empty()) out.cases.clear();
  return out;
}

}  // namespace pto
