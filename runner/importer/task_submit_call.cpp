#include "importer/task_submit_call.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <regex>

#include "importer/shell_words.h"

namespace pto {

std::optional<double> number(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) return std::nullopt;
  return v;
}

// The task-submit call of a run: script, and the text before and after it.
std::optional<TaskSubmitCall> find_task_submit(const std::string& run, std::string& before, std::string& after,
                                               std::vector<std::string>& problems) {
  static const std::regex call_re(R"((^|[\n;&|]\s*)task-submit\s)");
  std::smatch m;
  if (!std::regex_search(run, m, call_re)) return std::nullopt;
  std::size_t start = static_cast<std::size_t>(m.position(0) + m[1].length());
  // The call ends at the first unquoted newline (not a continuation) or command separator.
  std::size_t end = start;
  char quote = 0;
  for (; end < run.size(); ++end) {
    char c = run[end];
    if (c == '\\') {
      ++end;
      continue;
    }
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '\n' || c == ';' || (c == '&' && end + 1 < run.size() && run[end + 1] == '&')) break;
  }
  before = run.substr(0, start);
  after = end < run.size() ? run.substr(end) : "";
  auto words = shell_words(run.substr(start, end - start));
  TaskSubmitCall call;
  int num = 0;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i].text;
    auto value = [&]() -> std::string { return i + 1 < words.size() ? words[++i].text : ""; };
    if (w == "--run") call.command = value();
    else if (w == "--device-num") num = static_cast<int>(number(value()).value_or(1));
    else if (w == "--device") {
      std::string d = value();
      if (d != "auto") {
        call.device_named = true;
        if (d.find_first_not_of("0123456789,") == std::string::npos) call.devices = static_cast<int>(std::count(d.begin(), d.end(), ',')) + 1;
      }
    } else if (w == "--max-time") call.max_time = number(value());
    else if (w == "--timeout") call.timeout = number(value());
    else if (w == "--no-device") call.devices = 0;
    else problems.push_back("task-submit option " + w + " has no equivalent here and was dropped");
  }
  if (num) call.devices = num;
  if (call.command.empty()) return std::nullopt;
  return call;
}

std::string map_workspace(std::string s, const std::string& checkout) {
  for (const std::string var : {"$GITHUB_WORKSPACE", "${GITHUB_WORKSPACE}"}) {
    if (!checkout.empty()) {
      const std::string own = var + "/" + checkout;
      // The checkout as a whole path component only: with checkout `pypto`, `$GITHUB_WORKSPACE/pypto-lib` is
      // a sibling, not `./-lib`.
      auto whole = [&](std::size_t end) {
        return end >= s.size() || !(std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_' || s[end] == '-' || s[end] == '.');
      };
      for (std::size_t p = 0; (p = s.find("cd " + own + " && ", p)) != std::string::npos;) s.erase(p, own.size() + 7);
      for (std::size_t p = 0; (p = s.find(own, p)) != std::string::npos;) {
        if (whole(p + own.size())) s.replace(p, own.size(), ".");
        else p += own.size();
      }
    }
    for (std::size_t p; (p = s.find(var + "/")) != std::string::npos;) s.replace(p, var.size() + 1, "../");
  }
  return s;
}

}  // namespace pto
