#include "engine/data_flow.h"

#include <algorithm>
#include <filesystem>

#include "config/device_spec.h"
#include "engine/file_commands.h"
#include "plan/expression.h"
#include "util/secret_mask.h"
#include "util/state_paths.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

std::string outcome_of(StepState st) {
  switch (st) {
    case StepState::Succeeded: case StepState::Deduplicated: case StepState::Reused: return "success";
    case StepState::Failed: case StepState::TimedOut: return "failure";
    case StepState::Cancelled: case StepState::Interrupted: return "cancelled";
    default: return "skipped";
  }
}

}  // namespace

ConditionContext DataFlow::context(std::size_t j, std::size_t step) const {
  const PlanJob& pj = plan_.jobs[j];
  const JobRecord& jr = run_.jobs[j];
  ConditionContext ctx;
  for (const auto& [k, v] : pj.matrix) ctx.matrix[k] = v;
  // The env context as GitHub builds it: $GITHUB_ENV values, then the job's env, then the step's.
  ctx.env = jr.file_env;
  for (const auto& [k, v] : pj.env) ctx.env[k] = v;
  if (step != kNoStep)
    for (const auto& [k, v] : pj.steps[step].env) ctx.env[k] = v;
  for (std::size_t k = 0; k < pj.steps.size(); ++k) {
    if (pj.steps[k].id.empty() || !is_final(jr.steps[k].state) || k == step) continue;
    // A deduplicated step did its work as the step it repeats: it has that step's outputs.
    std::size_t from = pj.steps[k].deduplicated_from ? static_cast<std::size_t>(*pj.steps[k].deduplicated_from) : k;
    const std::string prefix = "steps." + pj.steps[k].id + ".";
    for (const auto& [name, value] : jr.steps[from].outputs) ctx.values[prefix + "outputs." + name] = value;
    std::string o = outcome_of(jr.steps[from].state);
    ctx.values[prefix + "outcome"] = o;
    ctx.values[prefix + "conclusion"] = o == "failure" && pj.steps[k].continue_on_error ? "success" : o;
  }
  for (const auto& need : pj.needs) {
    auto it = legs_.find(need);
    if (it == legs_.end()) continue;
    // A matrix job's legs: the outputs of the leg that finished last win, as in GitHub.
    std::vector<std::size_t> legs = it->second;
    std::sort(legs.begin(), legs.end(), [&](std::size_t a, std::size_t b) {
      return run_.jobs[a].finished_at < run_.jobs[b].finished_at;
    });
    std::string result = "success";
    int skipped = 0;
    for (std::size_t leg : legs) {
      const JobRecord& r = run_.jobs[leg];
      for (const auto& [name, value] : r.outputs)
        if (!value.empty()) ctx.values["needs." + need + ".outputs." + name] = value;
      if (r.state == JobState::Failed && !plan_.jobs[leg].continue_on_error) result = "failure";
      else if (r.state == JobState::Cancelled && result != "failure") result = "cancelled";
      skipped += r.state == JobState::Skipped;
    }
    if (skipped == static_cast<int>(legs.size())) result = "skipped";
    ctx.values["needs." + need + ".result"] = result;
  }
  return ctx;
}

void DataFlow::resolve_job(std::size_t j) {
  ConditionContext ctx = context(j);
  for (auto& [k, v] : plan_.jobs[j].env) v = interpolate(v, ctx);
}

void DataFlow::resolve_step(std::size_t j, std::size_t s) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (sr.resolved) return;
  sr.resolved = true;
  PlanStep& ps = plan_.jobs[j].steps[s];
  ConditionContext job_ctx = context(j);
  for (auto& [k, v] : ps.env) v = interpolate(v, job_ctx);  // step env reads the job-level env context
  ConditionContext ctx = context(j, s);
  ps.run = interpolate(ps.run, ctx);
  ps.name = interpolate(ps.name, ctx);
  ps.working_directory = interpolate(ps.working_directory, ctx);
}

std::string DataFlow::files_prefix(std::size_t j, std::size_t s) const {
  return run_files(run_dir_) + "/" + std::to_string(j + 1) + "-" + std::to_string(s + 1);
}

void DataFlow::forget_step_files(std::size_t j, std::size_t s) const {
  for (const char* f : {".env", ".path", ".output", ".summary"}) {
    std::error_code ec;
    fs::remove(files_prefix(j, s) + f, ec);
  }
}

bool DataFlow::take_step_files(std::size_t j, std::size_t s, std::string& error) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const std::string prefix = files_prefix(j, s);
  // The lead job runs as the daemon; every other step as the run's user.
  const uid_t owner = plan_.jobs[j].steps[s].kind == StepKind::ToolchainSetup ? ::geteuid() : files_owner_;
  std::string env_text, path_text, output_text;
  // Most steps write none of the four: then there is nothing to remove after (four path walks a step less).
  bool found[4] = {false, false, false, false};
  if (!read_step_file(prefix + ".env", owner, env_text, error, 1 << 20, &found[0]) ||
      !read_step_file(prefix + ".path", owner, path_text, error, 1 << 20, &found[1]) ||
      !read_step_file(prefix + ".output", owner, output_text, error, 1 << 20, &found[2]))
    return false;
  NameValues env, outputs;
  if (!parse_name_value_file(env_text, env, error)) {
    error = "$GITHUB_ENV " + error;
    return false;
  }
  if (!parse_name_value_file(output_text, outputs, error)) {
    error = "$GITHUB_OUTPUT " + error;
    return false;
  }
  // Stored masked, as GitHub does not pass on an output holding a secret: later steps see *** too.
  for (auto& [k, v] : outputs) sr.outputs[k] = mask_ ? mask_->apply(v) : v;
  // pto-runner's own variables are not the step's to change (the marker finds its escaped processes).
  for (auto& [k, v] : env)
    if (k.rfind("PTO_RUNNER_", 0) != 0) jr.file_env[k] = v;
  for (auto& p : parse_path_file(path_text)) jr.path_prepend.insert(jr.path_prepend.begin(), p);
  // Its summary joins the run's (as GitHub shows every step's under the job); over GitHub's 1 MiB it is left
  // out and said so, without failing the step.
  std::string summary_error;
  if (!read_step_file(prefix + ".summary", owner, sr.summary, summary_error, 1 << 20, &found[3]))
    sr.summary = "*(" + step_label(plan_.jobs[j], plan_.jobs[j].steps[s]) + ": its step summary is left out: " +
                 summary_error + ")*\n";
  else if (mask_)
    sr.summary = mask_->apply(sr.summary);
  // Read, the files are the records' now: what a step wrote there (a secret it printed into $GITHUB_OUTPUT)
  // is not kept beside them unmasked.
  if (found[0] || found[1] || found[2] || found[3]) forget_step_files(j, s);
  return true;
}

void DataFlow::finish_job(std::size_t j) {
  ConditionContext ctx = context(j);
  for (const auto& [name, expr] : plan_.jobs[j].outputs) run_.jobs[j].outputs[name] = interpolate(expr, ctx);
}

std::vector<std::string> DataFlow::step_env(std::size_t j, std::size_t s, const std::map<std::string, std::string>& base,
                                            const std::vector<int>& cards, const std::string& path_first) const {
  const PlanJob& pj = plan_.jobs[j];
  const PlanStep& ps = pj.steps[s];
  const JobRecord& jr = run_.jobs[j];
  // In a parallel job the plain steps run at once, so what one writes to $GITHUB_ENV/PATH reaches only the
  // cleanup steps that run after them all.
  const bool sees_files = !pj.parallel || ps.if_has_status_function;
  std::map<std::string, std::string> env = base;
  if (sees_files)
    for (const auto& [k, v] : jr.file_env) env[k] = v;
  for (const auto& [k, v] : pj.env) env[k] = v;
  for (const auto& [k, v] : ps.env) env[k] = v;
  if (sees_files && !jr.path_prepend.empty()) {
    std::string path;
    for (const auto& p : jr.path_prepend) path += p + ":";
    env["PATH"] = path + env["PATH"];
  }
  if (!path_first.empty()) env["PATH"] = path_first + ":" + env["PATH"];
  // Named, not made: `echo x >> "$GITHUB_OUTPUT"` creates it, and a step that writes none costs no inode
  // (creating four files per step was the largest per-step cost again: bench/README.md, dispatch overhead).
  const std::string files = files_prefix(j, s);
  env["GITHUB_ENV"] = files + ".env";
  env["GITHUB_PATH"] = files + ".path";
  env["GITHUB_OUTPUT"] = files + ".output";
  env["GITHUB_STEP_SUMMARY"] = files + ".summary";
  if (!cards.empty()) {
    env["TASK_DEVICE"] = join_ids(cards);
    env["DEVICE_ID"] = std::to_string(cards.front());
  }
  if (pj.toolchain)
    for (const auto& [k, v] : run_.toolchain_env) env[k] = v;
  env["PTO_RUNNER_RUN_ID"] = run_.id;
  env["PTO_RUNNER_JOB"] = pj.id;
  env["PTO_RUNNER_STEP"] = ps.name;
  if (!ps.device_type.empty()) env["PTO_RUNNER_DEVICE_TYPE"] = ps.device_type;  // task-submit's leases: the same type
  if (ps.kind == StepKind::ToolchainSetup) env["PTO_RUNNER_OUTPUT_ENV"] = run_toolchain_env(run_dir_);
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace pto
