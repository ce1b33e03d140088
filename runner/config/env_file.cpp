#include "config/env_file.h"

#include <regex>
#include <sstream>

#include "util/regular_file.h"

namespace pto {

std::map<std::string, std::string> load_env_file(const std::string& path, const std::string& display, Diagnostics& diags) {
  std::map<std::string, std::string> out;
  std::string text, error;
  if (!read_regular_file(path, 1 << 20, text, error)) {
    diags.error(display, 0, 0, "unreadable", "env-file: " + error);
    return out;
  }
  static const std::regex name_re("[A-Za-z_][A-Za-z0-9_]*");
  std::istringstream in(text);
  int line_no = 0;
  bool bad = false;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::size_t eq = line.find('=');
    const std::string name = eq == std::string::npos ? "" : line.substr(0, eq);
    if (eq == std::string::npos || !std::regex_match(name, name_re)) {
      diags.error(display, line_no, static_cast<int>(first) + 1, "bad-value",
                  "env-file: a line is KEY=VALUE with KEY like [A-Za-z_][A-Za-z0-9_]*, got '" + line.substr(0, 80) + "'");
      bad = true;
      continue;
    }
    if (name.rfind("PTO_RUNNER_", 0) == 0) {
      diags.error(display, line_no, 1, "bad-value", "env-file: PTO_RUNNER_* are pto-runner's own variables");
      bad = true;
      continue;
    }
    out[name] = line.substr(eq + 1);
  }
  if (bad) out.clear();
  return out;
}

}  // namespace pto
