#include "config/yaml_map.h"

#include <regex>

#include "util/regular_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace pto {

SourceLoc loc_of(const YAML::Node& node) {
  if (!node.IsDefined()) return {};
  const YAML::Mark m = node.Mark();
  if (m.is_null() || m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

bool blank_or_comment(const std::string& l) {
  auto p = l.find_first_not_of(' ');
  return p == std::string::npos || l[p] == '#';
}

// Where the keys of a line's mapping start: after "- " for a list item, else its indentation.
std::size_t key_column(const std::string& l) {
  std::size_t p = l.find_first_not_of(' ');
  while (p != std::string::npos && p + 1 < l.size() && l[p] == '-' && l[p + 1] == ' ') p = l.find_first_not_of(' ', p + 1);
  return p == std::string::npos ? 0 : p;
}

/// A maintainer's reading of yaml-cpp's terse errors ("illegal map value", "end of sequence not found"): a
/// tab in an indentation, or a line whose indentation matches no mapping around it. Empty when neither.
std::string explain_yaml_error(const std::vector<std::string>& lines, int& line, int& col) {
  if (line < 1 || line > static_cast<int>(lines.size())) return "";
  // The error is often found a line or two after the cause: look back to the first line that does not line up.
  for (int l = line; l >= std::max(2, line - 2); --l) {
    const std::string& cur = lines[l - 1];
    if (blank_or_comment(cur)) continue;
    int prev = l - 1;
    while (prev >= 1 && blank_or_comment(lines[prev - 1])) --prev;
    if (prev < 1) break;
    std::size_t indent = cur.find_first_not_of(' ');
    std::size_t keys = key_column(lines[prev - 1]), prev_indent = lines[prev - 1].find_first_not_of(' ');
    bool opens_block = lines[prev - 1].back() == ':' || lines[prev - 1].back() == '|' || lines[prev - 1].back() == '>';
    if (indent == keys || indent == prev_indent || indent < prev_indent) continue;
    if (opens_block && indent > keys) continue;
    line = l;
    col = static_cast<int>(indent) + 1;
    return "bad indentation: line " + std::to_string(l) + " starts at column " + std::to_string(indent + 1) +
           ", but the mapping it continues (line " + std::to_string(prev) + ") has its keys at column " +
           std::to_string(keys + 1) + "; keys of one mapping must line up (indent with spaces)";
  }
  return "";
}

}  // namespace

std::optional<YAML::Node> parse_yaml_text(const std::string& text, const std::string& display, Diagnostics& diags) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    const std::vector<std::string> lines = split_lines(text);
    int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    int col = e.mark.is_null() ? 1 : e.mark.column + 1;
    std::string why;
    // YAML indents with spaces only; a tab there is the usual cause of yaml-cpp's "illegal block entry". (A tab
    // inside a block scalar's text is fine, so only lines at or just before the failure are looked at.)
    for (int l = std::max(1, line - 2); l <= std::min<int>(line, static_cast<int>(lines.size())) && why.empty(); ++l) {
      std::size_t ws = lines[l - 1].find_first_not_of(" \t"), tab = lines[l - 1].find('\t');
      if (tab != std::string::npos && (ws == std::string::npos || tab < ws)) {
        why = "a tab in the indentation of line " + std::to_string(l) + "; YAML indents with spaces only";
        line = l;
        col = static_cast<int>(tab) + 1;
      }
    }
    if (why.empty()) why = explain_yaml_error(lines, line, col);
    // yaml-cpp's own words ("end of map not found") only when we cannot say better.
    diags.error(display, line, col, "yaml-syntax", why.empty() ? "invalid YAML: " + e.msg : why);
  } catch (const std::exception& e) {
    diags.error(display, 1, 1, "yaml-syntax", std::string("invalid YAML: ") + e.what());
  }
  return std::nullopt;
}

std::optional<YAML::Node> load_yaml_file(const std::filesystem::path& path, const std::string& display,
                                         Diagnostics& diags) {
  // Never blocks (a FIFO named runner.yml) and reads only a regular file, each wrong kind said plainly.
  std::string text, error;
  if (!read_regular_file(path.string(), kMaxYamlBytes, text, error)) {
    diags.error(display, 0, 0, "unreadable", error);
    return std::nullopt;
  }
  return parse_yaml_text(text, display, diags);
}

static std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = static_cast<std::size_t>(-1);
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  std::string s = node.Scalar();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return "'" + s + "'";
}

YAML::Node child(const YAML::Node& node, const std::string& key) {
  if (!node.IsDefined() || !node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (auto it = node.begin(); it != node.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  return YAML::Node(YAML::NodeType::Undefined);
}

bool is_expression(const std::string& text) { return text.find("${{") != std::string::npos; }

MapReader::MapReader(const YAML::Node& node, std::string what, std::vector<std::string> allowed,
                     const std::string& file, Diagnostics& diags)
    : node_(node), what_(std::move(what)), file_(file), diags_(diags) {
  is_map_ = node.IsMap();
  if (!is_map_) {
    error_at(node, "wrong-type", what_ + ": expected a mapping of keys, got " + describe_node(node));
    return;
  }
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node& k = it->first;
    if (!k.IsScalar()) {
      error_at(k, "wrong-type", what_ + ": keys must be plain names, got " + describe_node(k));
      continue;
    }
    const std::string key = k.Scalar();
    entries_.emplace(key, it->second);
    if (!seen.insert(key).second) {
      error_at(k, "duplicate-key", what_ + ": key '" + key + "' is given twice; YAML keeps only one of them");
    }
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string msg = "unknown key '" + key + "' in " + what_;
      std::string near = nearest_word(key, allowed);
      if (!near.empty()) msg += "; did you mean '" + near + "'?";
      else {
        std::string all;
        for (const auto& a : allowed) all += (all.empty() ? "" : ", ") + a;
        msg += " (known keys: " + all + ")";
      }
      error_at(k, "unknown-key", msg);
    }
  }
}

bool MapReader::has(const std::string& key) const { return entries_.count(key) > 0; }

YAML::Node MapReader::get(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? YAML::Node(YAML::NodeType::Undefined) : it->second;
}

void MapReader::error_at(const YAML::Node& node, const std::string& rule, const std::string& message) {
  SourceLoc l = loc_of(node);
  if (l.line == 0) l = loc_of(node_);
  diags_.error(file_, l.line, l.col, rule, message);
}

std::optional<std::string> MapReader::string(const std::string& key, bool required) {
  YAML::Node v = get(key);
  if (!v.IsDefined()) {
    if (required && is_map_)
      error_at(node_, "missing-key", what_ + ": required key '" + key + "' is missing");
    return std::nullopt;
  }
  if (!v.IsScalar()) {
    error_at(v, "wrong-type", what_ + ": '" + key + "' expects a string, got " + describe_node(v));
    return std::nullopt;
  }
  return v.Scalar();
}

std::optional<bool> MapReader::boolean(const std::string& key) {
  YAML::Node v = get(key);
  if (!v.IsDefined()) return std::nullopt;
  if (v.IsScalar() && v.Tag() != "!") {
    if (v.Scalar() == "true") return true;
    if (v.Scalar() == "false") return false;
  }
  error_at(v, "wrong-type", what_ + ": '" + key + "' expects true or false, got " + describe_node(v));
  return std::nullopt;
}

std::optional<double> MapReader::number(const std::string& key, double min, double max) {
  YAML::Node v = get(key);
  if (!v.IsDefined()) return std::nullopt;
  if (v.IsScalar() && v.Tag() != "!") {
    const std::string& s = v.Scalar();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) {
      if (d >= min && d <= max) return d;
      std::ostringstream os;
      os << what_ << ": '" << key << "' must be between " << min << " and " << max << ", got " << s;
      error_at(v, "bad-value", os.str());
      return std::nullopt;
    }
  }
  error_at(v, "wrong-type", what_ + ": '" + key + "' expects a number, got " + describe_node(v));
  return std::nullopt;
}

std::optional<long long> MapReader::integer(const std::string& key, long long min, long long max) {
  YAML::Node v = get(key);
  if (!v.IsDefined()) return std::nullopt;
  if (v.IsScalar() && v.Tag() != "!") {
    const std::string& s = v.Scalar();
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) {
      if (n >= min && n <= max) return n;
      error_at(v, "bad-value",
               what_ + ": '" + key + "' must be between " + std::to_string(min) + " and " + std::to_string(max) +
                   ", got " + s);
      return std::nullopt;
    }
  }
  error_at(v, "wrong-type", what_ + ": '" + key + "' expects an integer, got " + describe_node(v));
  return std::nullopt;
}

std::optional<std::uint64_t> MapReader::size(const std::string& key, std::uint64_t min) {
  YAML::Node v = get(key);
  if (!v.IsDefined()) return std::nullopt;
  static const std::regex size_re("([0-9]{1,15})([KMGT]?)(iB)?");
  std::smatch mm;
  const std::string text = v.IsScalar() ? v.Scalar() : "";
  if (!v.IsScalar() || !std::regex_match(text, mm, size_re) || (mm[3].matched && !mm[2].length())) {
    error_at(v, v.IsScalar() ? "bad-value" : "wrong-type", what_ + ": '" + key + "' is a size like 64G or 512M, got " + describe_node(v));
    return std::nullopt;
  }
  const int shift = mm[2].length() ? static_cast<int>(std::string("_KMGT").find(mm[2].str()[0])) * 10 : 0;
  const std::uint64_t n = std::stoull(mm[1].str());
  if (shift && n > (~std::uint64_t{0} >> shift)) {
    error_at(v, "bad-value", what_ + ": '" + key + "' is too large, got " + text);
    return std::nullopt;
  }
  if ((n << shift) < min) {
    error_at(v, "bad-value", what_ + ": '" + key + "' must be at least " + std::to_string(min) + " bytes, got " + text);
    return std::nullopt;
  }
  return n << shift;
}

std::optional<std::vector<std::string>> MapReader::strings(const std::string& key, bool allow_scalar) {
  YAML::Node v = get(key);
  if (!v.IsDefined()) return std::nullopt;
  if (v.IsNull()) return std::vector<std::string>{};
  if (allow_scalar && v.IsScalar()) return std::vector<std::string>{v.Scalar()};
  if (!v.IsSequence()) {
    error_at(v, "wrong-type", what_ + ": '" + key + "' expects a list, got " + describe_node(v));
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const auto& item : v) {
    if (!item.IsScalar()) {
      error_at(item, "wrong-type", what_ + ": '" + key + "' items must be strings, got " + describe_node(item));
      ok = false;
      continue;
    }
    out.push_back(item.Scalar());
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::map<std::string, std::string>> MapReader::scalar_map(const std::string& key) {
  YAML::Node v = get(key);
  if (!v.IsDefined()) return std::nullopt;
  if (v.IsNull()) return std::map<std::string, std::string>{};
  if (!v.IsMap()) {
    error_at(v, "wrong-type", what_ + ": '" + key + "' expects a mapping of NAME: value, got " + describe_node(v));
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  bool ok = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it->first.IsScalar()) {
      error_at(it->first, "wrong-type", what_ + ": '" + key + "' names must be strings");
      ok = false;
      continue;
    }
    const std::string name = it->first.Scalar();
    if (out.count(name)) error_at(it->first, "duplicate-key", what_ + ": '" + key + "." + name + "' is given twice");
    if (it->second.IsNull()) {
      out[name] = "";
    } else if (!it->second.IsScalar()) {
      error_at(it->second, "wrong-type",
               what_ + ": '" + key + "." + name + "' expects a string, got " + describe_node(it->second));
      ok = false;
    } else {
      out[name] = it->second.Scalar();
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace pto
