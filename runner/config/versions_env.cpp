#include "config/versions_env.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "config/yaml_map.h"
#include "util/regular_file.h"

namespace pto {

namespace {
const char* kVersionKey = "PTOAS_VERSION";
const std::map<std::string, std::string> kDigestKeys = {{"PTOAS_SHA256_X86_64", "x86_64"},
                                                        {"PTOAS_SHA256_AARCH64", "aarch64"}};
}  // namespace

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_ptoas_version(const std::string& s) {
  static const std::regex re(R"(v[0-9]+\.[0-9]+(\.[0-9]+)?)");
  return std::regex_match(s, re);
}

std::string VersionsEnv::version_number() const {
  return !ptoas_version.empty() && ptoas_version[0] == 'v' ? ptoas_version.substr(1) : ptoas_version;
}

std::string VersionsEnv::sha256_for(const std::string& arch) const {
  auto it = sha256_by_arch.find(arch);
  return it == sha256_by_arch.end() ? std::string() : it->second;
}

VersionsEnv parse_versions_env(const std::string& text, const std::string& display, Diagnostics& diags) {
  static const std::regex key_re("[A-Z0-9_]+");
  VersionsEnv env;
  env.file = display;
  std::map<std::string, int> seen_line;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (first != 0) {
      diags.error(display, lineno, 1, "bad-value", "leading whitespace; write KEY=value at the start of the line");
      continue;
    }
    std::size_t eq = line.find('=');
    if (eq == std::string::npos) {
      diags.error(display, lineno, 1, "bad-value", "expected KEY=value, got '" + line + "'");
      continue;
    }
    std::string key = line.substr(0, eq);
    std::string value = line.substr(eq + 1);
    if (!key.empty() && (key.back() == ' ' || key.back() == '\t')) {
      diags.error(display, lineno, static_cast<int>(eq), "bad-value",
                  "space before '='; write KEY=value with no spaces (grep and $GITHUB_OUTPUT read it verbatim)");
      continue;
    }
    if (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      diags.error(display, lineno, static_cast<int>(eq) + 2, "bad-value",
                  "space after '='; write KEY=value with no spaces (grep and $GITHUB_OUTPUT read it verbatim)");
      continue;
    }
    if (!std::regex_match(key, key_re)) {
      diags.error(display, lineno, 1, "bad-value", "key '" + key + "' must match [A-Z0-9_]+");
      continue;
    }
    std::size_t ws = value.find_first_of(" \t");
    if (ws != std::string::npos) {
      std::size_t rest = value.find_first_not_of(" \t", ws);
      if (rest != std::string::npos && value[rest] != '#') {
        diags.error(display, lineno, static_cast<int>(eq + 2 + ws), "bad-value",
                    "value of " + key + " contains whitespace");
        continue;
      }
      value = value.substr(0, ws);  // trailing blanks or a trailing comment
    }
    if (!value.empty() && (value.front() == '"' || value.front() == '\'')) {
      diags.error(display, lineno, static_cast<int>(eq) + 2, "bad-value",
                  "value of " + key + " is quoted; write it bare (quotes would reach $GITHUB_OUTPUT)");
      continue;
    }
    auto [it, fresh] = seen_line.emplace(key, lineno);
    if (!fresh) {
      diags.error(display, lineno, 1, "duplicate-key",
                  key + " is set twice (first on line " + std::to_string(it->second) + ")");
      continue;
    }
    env.entries.emplace_back(key, value);
    const int vcol = static_cast<int>(eq) + 2;
    if (key == kVersionKey) {
      if (!is_ptoas_version(value))
        diags.error(display, lineno, vcol, "bad-value",
                    "PTOAS_VERSION must look like v0.52 (v, major, dot, minor), got '" + value + "'");
      else
        env.ptoas_version = value;
    } else if (auto d = kDigestKeys.find(key); d != kDigestKeys.end()) {
      if (!is_sha256_hex(value))
        diags.error(display, lineno, vcol, "bad-value",
                    key + " must be 64 lowercase hex digits (a sha256), got '" + value + "' (" +
                        std::to_string(value.size()) + " characters)");
      else
        env.sha256_by_arch[d->second] = value;
    } else if (key.rfind("PTOAS_", 0) == 0) {
      std::vector<std::string> known = {kVersionKey};
      for (const auto& [k, _] : kDigestKeys) known.push_back(k);
      std::string near = nearest_word(key, known);
      diags.warning(display, lineno, 1, "unknown-key",
                    "unknown PTOAS key '" + key + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"));
    }
  }
  if (!seen_line.count(kVersionKey))
    diags.error(display, 1, 1, "missing-key", "PTOAS_VERSION is missing (e.g. PTOAS_VERSION=v0.52)");
  for (const auto& [k, _] : kDigestKeys)
    if (!seen_line.count(k)) diags.error(display, 1, 1, "missing-key", k + " is missing (64 lowercase hex)");
  return env;
}

VersionsEnv load_versions_env(const std::string& path, const std::string& display, Diagnostics& diags) {
  // Never blocks on a FIFO and reads only a regular file (util/regular_file), as every file a person names.
  std::string text, error;
  if (!read_regular_file(path, 1 << 20, text, error)) {
    diags.error(display, 0, 0, "unreadable", "cannot read toolchain pin file: " + error);
    VersionsEnv env;
    env.file = display;
    return env;
  }
  return parse_versions_env(text, display, diags);
}

}  // namespace pto
