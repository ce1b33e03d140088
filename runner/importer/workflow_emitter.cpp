#include "importer/workflow_emitter.h"

#include <yaml-cpp/yaml.h>

#include "config/yaml_map.h"

namespace pto {

namespace {

// A node written back as it was read: maps and lists in block style, a scalar quoted when it was quoted
// (`'3.10'` must not become the number 3.1), a multi-line one as a literal block.
void emit(YAML::Emitter& out, const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (const auto& kv : n) {
        out << YAML::Key;
        emit(out, kv.first);
        out << YAML::Value;
        emit(out, kv.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& x : n) emit(out, x);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      if (n.Scalar().find('\n') != std::string::npos) out << YAML::Literal << n.Scalar();
      else if (n.Tag() == "!") out << YAML::SingleQuoted << n.Scalar();
      else out << n.Scalar();
      break;
    default:
      out << YAML::Null;
  }
}

// The keys of an NPU job that stay: what GitHub needs to place and gate it. Its env, defaults, container,
// services, strategy and outputs belong to the steps that moved into the definitions.
const char* const kKept[] = {"name", "needs", "if", "runs-on", "permissions", "concurrency", "timeout-minutes", "continue-on-error"};

YAML::Node submit_job(const YAML::Node& job, const std::string& id, const std::vector<std::string>& runs_on, const std::string& socket) {
  YAML::Node out(YAML::NodeType::Map);
  for (const char* k : kKept)
    if (YAML::Node v = child(job, k); v.IsDefined()) out[k] = v;
  if (!runs_on.empty()) {  // a simulator job submits from the NPU host, where the daemon's socket is
    YAML::Node labels(YAML::NodeType::Sequence);
    for (const auto& l : runs_on) labels.push_back(l);
    out["runs-on"] = labels;
  }
  YAML::Node step(YAML::NodeType::Map);
  step["name"] = "Run " + id + " on the host's NPU cards (pto-runner)";
  YAML::Node env(YAML::NodeType::Map);
  env["PTO_RUNNER_SERVER"] = "unix:" + socket;
  env["SHA"] = "${{ github.sha }}";
  env["REF"] = "${{ github.ref }}";
  step["env"] = env;
  // One run per workflow run: the key is $GITHUB_REPOSITORY/$GITHUB_RUN_ID/$GITHUB_RUN_ATTEMPT.
  step["run"] = "pto-runner submit --job " + id + " --attach --sha \"$SHA\" --ref \"$REF\" --follow";
  YAML::Node steps(YAML::NodeType::Sequence);
  steps.push_back(step);
  out["steps"] = steps;
  return out;
}

}  // namespace

std::string emit_switch_workflow(const std::string& path, const std::string& display,
                                 const std::map<std::string, std::vector<std::string>>& submitted, const std::string& socket,
                                 Diagnostics& diags) {
  auto doc = load_yaml_file(path, display, diags);
  if (!doc || !doc->IsMap()) return "";
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::BeginMap;
  for (const auto& kv : *doc) {
    out << YAML::Key;
    emit(out, kv.first);
    out << YAML::Value;
    if (kv.first.Scalar() != "jobs" || !kv.second.IsMap()) {
      emit(out, kv.second);
      continue;
    }
    out << YAML::BeginMap;
    for (const auto& j : kv.second) {
      out << YAML::Key << j.first.Scalar() << YAML::Value;
      if (auto s = submitted.find(j.first.Scalar()); s != submitted.end()) emit(out, submit_job(j.second, s->first, s->second, socket));
      else emit(out, j.second);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string("# Emitted by `pto-runner import --workflow ") + display +
         " --emit-workflow`: its NPU jobs submit to the host's pto-runner daemon; regenerate rather than edit.\n" + out.c_str() + "\n";
}

}  // namespace pto
