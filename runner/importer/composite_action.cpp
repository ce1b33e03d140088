#include "importer/composite_action.h"

#include <filesystem>
#include <regex>
#include <sstream>

#include "config/yaml_map.h"
#include "util/sha256.h"

namespace pto {

namespace fs = std::filesystem;

namespace {

std::string scalar_of(const YAML::Node& n) { return n.IsDefined() && n.IsScalar() ? n.Scalar() : ""; }

// `${{ inputs.NAME }}` (spaces allowed) replaced by the input's value.
std::string substitute(const std::string& text, const std::map<std::string, std::string>& inputs) {
  static const std::regex ref(R"(\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\})");
  std::string out;
  std::size_t last = 0;
  for (std::sregex_iterator m(text.begin(), text.end(), ref), e; m != e; ++m) {
    out.append(text, last, static_cast<std::size_t>(m->position()) - last);
    auto it = inputs.find((*m)[1].str());
    out += it == inputs.end() ? "" : it->second;
    last = static_cast<std::size_t>(m->position() + m->length());
  }
  return out + text.substr(last);
}

}  // namespace

std::set<std::string> unset_names(const std::string& script, const std::map<std::string, std::string>& env) {
  static const std::regex test(R"re(^\s*(el)?if \[\s+"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?"\s+(=|==|!=)\s+"?([^"\s\]]*)"?\s+\];?\s*(then)?\s*$)re");
  static const std::regex unset_line(R"(\bunset((?:\s+[A-Za-z_][A-Za-z0-9_]*)+))");
  // Each open `if`: whether the branch being read is taken (true, false, or unknown: read as taken).
  struct Branch {
    int taken;  // 1 yes, 0 no, -1 unknown
    bool any_taken;
  };
  std::vector<Branch> open;
  std::set<std::string> out;
  std::istringstream lines(script);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    std::string trimmed = line.substr(line.find_first_not_of(" \t") == std::string::npos ? line.size() : line.find_first_not_of(" \t"));
    if (std::regex_match(line, m, test)) {
      int taken = -1;
      if (auto v = env.find(m[2].str()); v != env.end()) taken = (v->second == m[4].str()) == (m[3].str() != "!=") ? 1 : 0;
      if (m[1].matched && !open.empty()) {  // elif: taken only if no earlier branch was
        Branch& b = open.back();
        b.taken = b.any_taken ? 0 : taken;
        b.any_taken |= taken == 1;
      } else {
        open.push_back({taken, taken == 1});
      }
      continue;
    }
    const bool one_line = trimmed.find("; fi") != std::string::npos || (trimmed.size() >= 2 && trimmed.compare(trimmed.size() - 2, 2, "fi") == 0);
    if (trimmed.rfind("if ", 0) == 0 && trimmed.find("then") != std::string::npos && !one_line) {
      open.push_back({-1, false});  // a test we do not read: both ways
      continue;
    }
    if (trimmed == "else" && !open.empty()) {
      Branch& b = open.back();
      b.taken = b.taken == -1 ? -1 : (b.any_taken ? 0 : 1);
      continue;
    }
    if ((trimmed == "fi" || trimmed.rfind("fi ", 0) == 0 || trimmed.rfind("fi;", 0) == 0) && !open.empty()) {
      open.pop_back();
      continue;
    }
    bool reached = true;
    for (const Branch& b : open) reached &= b.taken != 0;
    if (!reached || trimmed.rfind('#', 0) == 0) continue;
    for (std::sregex_iterator u(line.begin(), line.end(), unset_line), e; u != e; ++u) {
      std::istringstream names((*u)[1].str());
      for (std::string n; names >> n;) out.insert(n);
    }
  }
  return out;
}

std::optional<CompositeUse> read_composite_action(const std::string& repo_root, const std::string& uses, const YAML::Node& with,
                                                  std::string& problem) {
  fs::path dir = fs::path(repo_root) / uses;
  fs::path file = dir / "action.yml";
  if (!fs::is_regular_file(file)) file = dir / "action.yaml";
  if (!fs::is_regular_file(file)) {
    problem = "no action.yml under " + dir.string();
    return std::nullopt;
  }
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    problem = file.string() + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg;
    return std::nullopt;
  }
  const YAML::Node runs = child(doc, "runs"), steps = child(runs, "steps");
  if (scalar_of(child(runs, "using")) != "composite" || !steps.IsSequence()) {
    problem = file.string() + " is not a composite action (runs.using: composite, runs.steps)";
    return std::nullopt;
  }
  // Its inputs: the caller's `with:`, else each input's default.
  std::map<std::string, std::string> inputs;
  for (const auto& kv : child(doc, "inputs").IsMap() ? child(doc, "inputs") : YAML::Node(YAML::NodeType::Map))
    inputs[kv.first.Scalar()] = scalar_of(child(kv.second, "default"));
  if (with.IsDefined() && with.IsMap())
    for (const auto& kv : with) inputs[kv.first.Scalar()] = scalar_of(kv.second);
  CompositeUse use;
  use.action = uses;
  for (const auto& st : steps) {
    if (!child(st, "run").IsDefined()) continue;
    CompositeStep cs;
    cs.name = scalar_of(child(st, "name"));
    cs.run = substitute(scalar_of(child(st, "run")), inputs);
    cs.sha = sha256_hex(scalar_of(child(st, "run"))).substr(0, 12);  // of the action's own text: one per step, whoever calls it
    std::map<std::string, std::string> env;
    if (child(st, "env").IsMap())
      for (const auto& kv : child(st, "env")) env[kv.first.Scalar()] = substitute(scalar_of(kv.second), inputs);
    for (const auto& n : unset_names(cs.run, env)) use.unsets.insert(n);
    use.steps.push_back(std::move(cs));
  }
  return use;
}

}  // namespace pto
