#include "lint/gha_workflow.h"

#include <map>

#include "config/job_graph.h"
#include "util/json_text.h"

namespace pto {

namespace {

nlohmann::json to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (auto it = n.begin(); it != n.end(); ++it) j[it->first.Scalar()] = to_json(it->second);
    return j;
  }
  if (n.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& item : n) j.push_back(to_json(item));
    return j;
  }
  if (n.IsScalar()) return n.Scalar();
  return nullptr;
}

std::string scalar_or_empty(const YAML::Node& n) { return n.IsDefined() && n.IsScalar() ? n.Scalar() : ""; }


struct RunDefaults {
  std::string working_directory;
  std::string shell;
};

RunDefaults read_defaults(const YAML::Node& owner, RunDefaults inherited) {
  YAML::Node run = child(child(owner, "defaults"), "run");
  if (auto wd = scalar_or_empty(child(run, "working-directory")); !wd.empty()) inherited.working_directory = wd;
  if (auto sh = scalar_or_empty(child(run, "shell")); !sh.empty()) inherited.shell = sh;
  return inherited;
}

}  // namespace

static Workflow load_workflow_unguarded(const std::string& path, const std::string& display, Diagnostics& diags) {
  Workflow wf;
  wf.file = display;
  auto doc = load_yaml_file(path, display, diags);
  if (!doc) return wf;
  if (!doc->IsMap()) {
    SourceLoc l = loc_of(*doc);
    diags.error(display, l.line ? l.line : 1, l.col ? l.col : 1, "wrong-type",
                "a workflow is a mapping with 'jobs', got " + describe_node(*doc));
    return wf;
  }
  YAML::Node jobs = child(*doc, "jobs");
  if (!jobs.IsDefined()) {
    if (child(*doc, "runs").IsDefined())  // a composite action (.github/actions/X/action.yml), not a workflow
      diags.error(display, 1, 1, "missing-key", "this is an action (it has runs:), not a workflow: lint --workflow the workflow that "
                                                "uses it; with --against its steps are read there, under each caller's with:");
    else
      diags.error(display, 1, 1, "missing-key", "workflow: required key 'jobs' is missing");
    return wf;
  }
  if (!jobs.IsMap()) {
    SourceLoc l = loc_of(jobs);
    diags.error(display, l.line, l.col, "wrong-type", "workflow: 'jobs' expects a mapping of job ids");
    return wf;
  }
  RunDefaults wf_defaults = read_defaults(*doc, {});
  for (auto it = jobs.begin(); it != jobs.end(); ++it) {
    WorkflowJob job;
    job.id = it->first.Scalar();
    job.loc = loc_of(it->first);
    const YAML::Node& body = it->second;
    if (!body.IsMap()) {
      SourceLoc l = loc_of(body);
      diags.error(display, l.line, l.col, "wrong-type", "job '" + job.id + "' expects a mapping, got " +
                                                            describe_node(body));
      continue;
    }
    YAML::Node needs = child(body, "needs");
    if (needs.IsDefined()) {
      if (needs.IsScalar()) {
        job.needs.push_back(needs.Scalar());
        job.needs_locs.push_back(loc_of(needs));
      } else if (needs.IsSequence()) {
        for (const auto& n : needs)
          if (n.IsScalar()) {
            job.needs.push_back(n.Scalar());
            job.needs_locs.push_back(loc_of(n));
          }
      } else {
        SourceLoc l = loc_of(needs);
        diags.error(display, l.line, l.col, "wrong-type", "job '" + job.id + "': 'needs' expects a job id or a list");
      }
    }
    RunDefaults defaults = read_defaults(body, wf_defaults);
    YAML::Node steps = child(body, "steps");
    if (steps.IsDefined() && !steps.IsSequence()) {
      SourceLoc l = loc_of(steps);
      diags.error(display, l.line, l.col, "wrong-type", "job '" + job.id + "': 'steps' expects a list");
    } else if (steps.IsDefined()) {
      for (const auto& s : steps) {
        WorkflowStep step;
        step.loc = loc_of(s);
        if (!s.IsMap()) {
          diags.error(display, step.loc.line, step.loc.col, "wrong-type",
                      "job '" + job.id + "': each step is a mapping, got " + describe_node(s));
          continue;
        }
        step.name = scalar_or_empty(child(s, "name"));
        StepKeyFields f;
        f.run = scalar_or_empty(child(s, "run"));
        step.run = f.run;
        if (child(s, "run").IsDefined()) {
          step.run_loc = loc_of(child(s, "run"));
          step.run_is_block = child(s, "run").Tag() == "!" && f.run.find('\n') != std::string::npos;
        }
        f.uses = scalar_or_empty(child(s, "uses"));
        step.has_body = !f.run.empty() || !f.uses.empty();
        YAML::Node env = child(s, "env");
        if (env.IsMap())
          for (auto e = env.begin(); e != env.end(); ++e)
            f.env[e->first.Scalar()] = e->second.IsScalar() ? e->second.Scalar() : dump_json(to_json(e->second));
        f.working_directory = scalar_or_empty(child(s, "working-directory"));
        if (f.working_directory.empty() && !f.run.empty()) f.working_directory = defaults.working_directory;
        f.shell = scalar_or_empty(child(s, "shell"));
        if (f.shell.empty()) f.shell = defaults.shell.empty() ? "bash" : defaults.shell;
        f.if_expr = scalar_or_empty(child(s, "if"));
        if (child(s, "with").IsDefined()) f.with = to_json(child(s, "with"));
        step.key = step_key(f);
        job.steps.push_back(std::move(step));
      }
    }
    wf.jobs.push_back(std::move(job));
  }

  std::map<std::string, std::vector<std::string>> graph;
  std::vector<std::string> ids;
  for (const auto& j : wf.jobs) ids.push_back(j.id);
  for (const auto& j : wf.jobs) {
    auto& deps = graph[j.id];
    for (std::size_t i = 0; i < j.needs.size(); ++i) {
      if (std::find(ids.begin(), ids.end(), j.needs[i]) == ids.end()) {
        std::string near = nearest_word(j.needs[i], ids);
        diags.error(display, j.needs_locs[i].line, j.needs_locs[i].col, "unknown-need",
                    "job '" + j.id + "' needs '" + j.needs[i] + "', which is not a job of this workflow" +
                        (near.empty() ? "" : "; did you mean '" + near + "'?"));
      } else {
        deps.push_back(j.needs[i]);
      }
    }
  }
  JobGraphResult order = order_jobs(graph);
  if (!order.cycle.empty()) {
    std::string text;
    for (const auto& n : order.cycle) text += (text.empty() ? "" : " -> ") + n;
    SourceLoc l{1, 1};
    for (const auto& j : wf.jobs)
      if (j.id == order.cycle.front()) l = j.loc;
    diags.error(display, l.line, l.col, "cycle", "jobs form a cycle: " + text);
  }
  return wf;
}

Workflow load_workflow(const std::string& path, const std::string& display, Diagnostics& diags) {
  Workflow out; out.file = display;
  guard_yaml(display, diags, [&] { out = load_workflow_unguarded(path, display, diags); });
  return out;
}

}  // namespace pto
