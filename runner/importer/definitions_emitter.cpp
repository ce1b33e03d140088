#include "importer/definitions_emitter.h"

#include <algorithm>

namespace pto::imported {

namespace {

std::string step_name_template(const Step& s, const Model& m) {
  std::size_t at = s.name.find(s.example);
  if (at == std::string::npos) return "Run {model} {example} example";
  std::string head = s.name.substr(0, at), tail = s.name.substr(at + s.example.size());
  std::size_t model_at = head.rfind(m.display);
  if (model_at != std::string::npos) head.replace(model_at, m.display.size(), "{model}");
  return head + "{example}" + tail;
}

void emit_minutes(YAML::Emitter& e, const char* key, const std::optional<double>& v) {
  if (!v) return;
  e << YAML::Key << key << YAML::Value;
  if (*v == static_cast<long long>(*v)) e << static_cast<long long>(*v);
  else e << *v;
}

void emit_env(YAML::Emitter& e, const std::map<std::string, std::string>& env) {
  if (env.empty()) return;
  e << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
  for (const auto& [k, v] : env) e << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  e << YAML::EndMap;
}

}  // namespace

std::string emit_job(const Job& job, const std::vector<Model>& models, const std::string& display) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << job.id;
  if (!job.needs.empty()) e << YAML::Key << "needs" << YAML::Value << YAML::Flow << job.needs;
  if (job.toolchain) e << YAML::Key << "toolchain" << YAML::Value << "ptoas";
  if (!job.if_expr.empty()) e << YAML::Key << "if" << YAML::Value << job.if_expr;
  emit_minutes(e, "timeout-minutes", job.timeout);
  if (job.continue_on_error) e << YAML::Key << "continue-on-error" << YAML::Value << true;
  emit_env(e, job.env);
  if (!job.outputs.empty()) {
    e << YAML::Key << "outputs" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : job.outputs) e << YAML::Key << k << YAML::Value << v;
    e << YAML::EndMap;
  }
  if (job.strategy.IsDefined()) e << YAML::Key << "strategy" << YAML::Value << job.strategy;
  if (!models.empty()) e << YAML::Key << "parallel" << YAML::Value << true;
  e << YAML::Key << "steps" << YAML::Value << YAML::BeginSeq;
  for (std::size_t i = 0; i < job.steps.size(); ++i) {
    const Step& s = job.steps[i];
    if (s.repeat) continue;
    e << YAML::BeginMap;
    if (!s.model.empty()) {
      // Consecutive model steps with one name pattern become one `models:` step.
      const Model* m = nullptr;
      for (const auto& x : models) m = x.id == s.model ? &x : m;
      std::string tmpl = step_name_template(s, *m);
      std::vector<std::string> ids = {s.model};
      while (i + 1 < job.steps.size() && !job.steps[i + 1].model.empty()) {
        const Step& n = job.steps[i + 1];
        if (n.repeat) {
          ++i;
          continue;
        }
        const Model* nm = nullptr;
        for (const auto& x : models) nm = x.id == n.model ? &x : nm;
        if (step_name_template(n, *nm) != tmpl) break;
        if (std::find(ids.begin(), ids.end(), n.model) == ids.end()) ids.push_back(n.model);
        ++i;
      }
      e << YAML::Key << "name" << YAML::Value << tmpl;
      if (!job.device_type.empty()) e << YAML::Key << "device-type" << YAML::Value << job.device_type;
      if (!s.if_expr.empty()) e << YAML::Key << "if" << YAML::Value << s.if_expr;
      emit_minutes(e, "timeout-minutes", s.timeout);
      emit_env(e, s.env);
      e << YAML::Key << "models" << YAML::Value << YAML::Flow << ids;
      e << YAML::EndMap;
      continue;
    }
    if (!s.name.empty()) e << YAML::Key << "name" << YAML::Value << s.name;
    if (!s.id.empty()) e << YAML::Key << "id" << YAML::Value << s.id;
    if (!s.if_expr.empty()) e << YAML::Key << "if" << YAML::Value << s.if_expr;
    if (s.devices) e << YAML::Key << "devices" << YAML::Value << s.devices;
    if (!job.device_type.empty()) e << YAML::Key << "device-type" << YAML::Value << job.device_type;
    emit_minutes(e, "timeout-minutes", s.timeout);
    emit_minutes(e, "queue-timeout-minutes", s.queue_timeout);
    emit_minutes(e, "run-timeout-minutes", s.run_timeout);
    if (s.continue_on_error) e << YAML::Key << "continue-on-error" << YAML::Value << true;
    emit_env(e, s.env);
    e << YAML::Key << "run" << YAML::Value;
    if (s.run.find('\n') != std::string::npos) e << YAML::Literal;
    e << s.run << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return std::string("# Imported from ") + display + " by `pto-runner import`.\n" + e.c_str() + "\n";
}

std::string emit_model(const Model& m, const std::string& display) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "model" << YAML::Value << m.display << YAML::Key << "dir" << YAML::Value << m.dir;
  e << YAML::Key << "command" << YAML::Value;
  if (m.command.find('\n') != std::string::npos) e << YAML::Literal;
  e << m.command;
  // Time bounds shared by every example are the model's.
  const Step& first = *m.examples.front();
  bool same_run = true, same_queue = true;
  for (const Step* s : m.examples) same_run &= s->run_timeout == first.run_timeout, same_queue &= s->queue_timeout == first.queue_timeout;
  if (same_queue) emit_minutes(e, "queue-timeout-minutes", first.queue_timeout);
  if (same_run) emit_minutes(e, "run-timeout-minutes", first.run_timeout);
  e << YAML::Key << "examples" << YAML::Value << YAML::BeginSeq;
  for (const Step* s : m.examples) {
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << s->example;
    if (s->devices != 1) e << YAML::Key << "devices" << YAML::Value << s->devices;
    if (!s->args.empty()) e << YAML::Key << "args" << YAML::Value << s->args;
    if (!same_queue) emit_minutes(e, "queue-timeout-minutes", s->queue_timeout);
    if (!same_run) emit_minutes(e, "run-timeout-minutes", s->run_timeout);
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return std::string("# Imported from ") + display + " by `pto-runner import`.\n" + e.c_str() + "\n";
}

}  // namespace pto::imported
