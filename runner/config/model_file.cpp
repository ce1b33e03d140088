#include "config/model_file.h"

#include <regex>
#include <set>

#include "config/toolchain_config.h"

namespace pto {

static std::vector<std::pair<std::string, std::string>> placeholders(const ModelFile& m, const ModelExample& ex) {
  return {{"dir", m.dir}, {"example", ex.name}, {"args", ex.args}, {"model", m.model},
          {"devices", std::to_string(ex.devices)}};
}

std::string ModelFile::command_for(const ModelExample& ex) const {
  std::string cmd = expand_braces(command, placeholders(*this, ex));
  // An example without args leaves a trailing blank (and a `|` block a newline); trim them so identical
  // commands compare equal.
  while (!cmd.empty() && (cmd.back() == ' ' || cmd.back() == '\n')) cmd.pop_back();
  return cmd;
}

static ModelFile load_model_file_unguarded(const std::string& path, const std::string& display, const std::string& id,
                          Diagnostics& diags) {
  ModelFile mf;
  mf.file = display;
  mf.id = id;
  auto doc = load_yaml_file(path, display, diags);
  if (!doc) return mf;
  mf.loc = loc_of(*doc);
  MapReader m(*doc, "model",
              {"model", "dir", "command", "examples", "timeout-minutes", "queue-timeout-minutes", "run-timeout-minutes",
               "expected-minutes", "device-type"},
              display, diags);
  if (!m.is_map()) return mf;
  if (auto v = m.string("model", true)) mf.model = *v;
  if (auto v = m.string("dir", true)) {
    mf.dir = *v;
    if (v->empty() || (*v)[0] == '/' || v->find("..") != std::string::npos)
      m.error_at(m.get("dir"), "bad-value", "'dir' is a relative path inside the checkout, got '" + *v + "'");
  }
  if (auto v = m.string("command", true)) {
    mf.command = *v;
    std::vector<std::string> unknown;
    expand_braces(*v, {{"dir", ""}, {"example", ""}, {"args", ""}, {"model", ""}, {"devices", ""}}, &unknown);
    for (const auto& u : unknown)
      m.error_at(m.get("command"), "bad-value",
                 "'command' uses unknown placeholder {" + u + "}; known: {dir}, {example}, {args}, {model}, {devices}");
    if (v->find("{example}") == std::string::npos)
      m.error_at(m.get("command"), "bad-value", "'command' must use {example}, or every example runs the same thing");
  }
  mf.timeout_minutes = m.number("timeout-minutes", 0.001, 10080);
  mf.queue_timeout_minutes = m.number("queue-timeout-minutes", 0.001, 10080);
  mf.run_timeout_minutes = m.number("run-timeout-minutes", 0.001, 10080);
  mf.expected_minutes = m.number("expected-minutes", 0, 10080);
  if (auto v = m.string("device-type")) mf.device_type = *v;

  YAML::Node examples = m.get("examples");
  if (!examples.IsDefined()) {
    m.error_at(*doc, "missing-key", "model: required key 'examples' is missing");
    return mf;
  }
  if (!examples.IsSequence()) {
    m.error_at(examples, "wrong-type", "model: 'examples' expects a list, got " + describe_node(examples));
    return mf;
  }
  std::map<std::string, int> names;
  static const std::regex name_re("[A-Za-z0-9_.-]+");
  for (const auto& node : examples) {
    ModelExample ex;
    ex.loc = loc_of(node);
    MapReader e(node, "example",
                {"name", "devices", "device-type", "args", "timeout-minutes", "queue-timeout-minutes",
                 "run-timeout-minutes", "expected-minutes", "env", "cpus", "memory", "perf"},
                display, diags);
    if (!e.is_map()) continue;
    if (auto v = e.string("name", true)) {
      ex.name = *v;
      if (!std::regex_match(*v, name_re))
        e.error_at(e.get("name"), "bad-value",
                   "example name '" + *v + "' must be a script name (letters, digits, _ . -)");
    }
    if (auto v = e.integer("devices", 0, 1024)) ex.devices = static_cast<int>(*v);
    if (auto v = e.string("args")) ex.args = *v;
    ex.device_type = mf.device_type;
    if (auto v = e.string("device-type")) ex.device_type = *v;
    ex.timeout_minutes = e.number("timeout-minutes", 0.001, 10080);
    ex.queue_timeout_minutes = e.number("queue-timeout-minutes", 0.001, 10080);
    ex.run_timeout_minutes = e.number("run-timeout-minutes", 0.001, 10080);
    ex.expected_minutes = e.number("expected-minutes", 0, 10080);
    if (auto v = e.scalar_map("env")) ex.env = *v;
    if (auto v = e.integer("cpus", 1, 65536)) ex.cpus = static_cast<int>(*v), ex.cpus_loc = loc_of(e.get("cpus"));
    if (auto v = e.size("memory", 1 << 20)) ex.memory = *v, ex.memory_loc = loc_of(e.get("memory"));
    if (e.has("perf")) ex.perf = read_perf(e.get("perf"), display, diags);
    // Two examples of one name would be two steps of one name doing different things (or the same thing
    // twice): an error where the second is written.
    if (!ex.name.empty()) {
      auto [it, fresh] = names.emplace(ex.name, ex.loc.line);
      if (!fresh)
        e.error_at(e.get("name"), "duplicate-key",
                   "example '" + ex.name + "' is already defined on line " + std::to_string(it->second) + " of this model");
    }
    mf.examples.push_back(std::move(ex));
  }
  if (mf.examples.empty()) m.error_at(examples, "bad-value", "model: 'examples' is empty; list at least one");
  return mf;
}

ModelFile load_model_file(const std::string& path, const std::string& display, const std::string& id,
                          Diagnostics& diags) {
  ModelFile out; out.file = display; out.id = id;
  guard_yaml(display, diags, [&] { out = load_model_file_unguarded(path, display, id, diags); });
  return out;
}

}  // namespace pto
