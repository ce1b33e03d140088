#pragma once
// A GitHub Actions workflow file, read just deeply enough to lint it: jobs, their needs, and each step's
// canonical content. Expressions (${{ }}) are kept as written; nothing is evaluated.
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "config/yaml_map.h"
#include "plan/step_key.h"

namespace pto {

struct WorkflowStep {
  std::string name;
  SourceLoc loc;
  std::string key;  // canonical step key (plan/step_key.h), with uses/with
  bool has_body = false;  // has `run` or `uses`; an empty step is not a duplicate of another empty one
  std::string run;        // as written, ${{ }} included
  SourceLoc run_loc;
  bool run_is_block = false;  // `run: |`: its text starts on the next line
};

struct WorkflowJob {
  std::string id;
  SourceLoc loc;
  std::vector<std::string> needs;
  std::vector<SourceLoc> needs_locs;
  std::vector<WorkflowStep> steps;
};

struct Workflow {
  std::string file;
  std::vector<WorkflowJob> jobs;
};

/// Reports YAML errors and structural problems (jobs not a mapping, steps not a list, unknown needs, cycles).
Workflow load_workflow(const std::string& path, const std::string& display, Diagnostics& diags);

}  // namespace pto
