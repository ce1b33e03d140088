#pragma once
// A test double of the GitHub Actions runner's workflow-command parser (actions/runner's
// ActionCommandManager), with the rules that matter for injection:
// - output is split into lines at \n, \r\n and \r (.NET ReadLine);
// - v2 form: the line with leading whitespace trimmed starts with `::`, and a second `::` closes the
//   command name and its properties (`::name k=v,k=v::data`);
// - v1 form: `##[name k=v;]data` anywhere in the line;
// - `::stop-commands::TOKEN` stops processing until a v2 command whose name is exactly TOKEN (`::TOKEN::`);
//   while stopped, nothing else is a command, v1 included.
#include <string>
#include <vector>

namespace pto::test {

struct ParsedCommand {
  std::string name;  // for a resume: the token
  std::string data;
  std::string line;
};

inline std::vector<std::string> runner_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n' || c == '\r') {
      lines.push_back(cur);
      cur.clear();
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

/// Where .NET's TrimStart() stops: past every Char.IsWhiteSpace character (ASCII ones, U+0085, U+00A0, U+1680,
/// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), in UTF-8.
inline std::size_t after_leading_whitespace(const std::string& s) {
  auto u = [&](std::size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  std::size_t i = 0;
  while (i < s.size()) {
    unsigned c = u(i);
    if (c == ' ' || (c >= 0x09 && c <= 0x0d)) i += 1;
    else if (c == 0xc2 && (u(i + 1) == 0x85 || u(i + 1) == 0xa0)) i += 2;
    else if (c == 0xe1 && u(i + 1) == 0x9a && u(i + 2) == 0x80) i += 3;
    else if (c == 0xe2 && u(i + 1) == 0x80 && (u(i + 2) <= 0x8a || u(i + 2) == 0xa8 || u(i + 2) == 0xa9 || u(i + 2) == 0xaf)) i += 3;
    else if (c == 0xe2 && u(i + 1) == 0x81 && u(i + 2) == 0x9f) i += 3;
    else if (c == 0xe3 && u(i + 1) == 0x80 && u(i + 2) == 0x80) i += 3;
    else break;
  }
  return i;
}

inline bool parse_v2(const std::string& line, ParsedCommand& out) {
  std::size_t b = after_leading_whitespace(line);
  if (b == line.size()) return false;
  std::string t = line.substr(b);
  if (t.compare(0, 2, "::") != 0) return false;
  std::size_t end = t.find("::", 2);
  if (end == std::string::npos) return false;
  std::string head = t.substr(2, end - 2);
  std::string name = head.substr(0, head.find(' '));
  if (name.empty()) return false;
  out = {name, t.substr(end + 2), line};
  return true;
}

inline bool parse_v1(const std::string& line, ParsedCommand& out) {
  std::size_t p = line.find("##[");
  if (p == std::string::npos) return false;
  std::size_t close = line.find(']', p + 3);
  if (close == std::string::npos) return false;
  std::string head = line.substr(p + 3, close - p - 3);
  std::string name = head.substr(0, head.find(' '));
  if (name.empty()) return false;
  out = {name, line.substr(close + 1), line};
  return true;
}

/// A step script (sh) that prints what a hostile or careless step might: commands at the start of a line,
/// indented, in the old `##[` form mid-line, a stop-commands guess and its resume, and a bare CR.
inline const char* kHostileStepScript =
    "echo '::error::x'\n"
    "echo '  ::endgroup::'\n"
    "printf '\\302\\240::error::nbsp\\n'\n"
    "echo 'text ##[error]x'\n"
    "echo '::add-mask::y'\n"
    "echo '::stop-commands::guess'\n"
    "echo '::guess::'\n"
    "printf 'a\\r::warning::cr\\n'\n"
    "printf 'no newline ::error::z'\n";

/// Every command the runner would act on, in order (stop-commands and resumes included).
inline std::vector<ParsedCommand> accepted_commands(const std::string& output) {
  std::vector<ParsedCommand> out;
  std::string stop_token;
  for (const auto& line : runner_lines(output)) {
    ParsedCommand c;
    if (!stop_token.empty()) {
      if (parse_v2(line, c) && c.name == stop_token) {
        out.push_back(c);
        stop_token.clear();
      }
      continue;
    }
    if (parse_v2(line, c) || parse_v1(line, c)) {
      if (c.name == "stop-commands" && !c.data.empty()) stop_token = c.data;
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace pto::test
