#pragma once
// Lint rules that go beyond loading: `duplicate-step` and `inline-toolchain-literal`, over the project's own
// definitions and over GitHub Actions workflow files.
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "lint/gha_workflow.h"
#include "config/project.h"
#include "importer/workflow_import.h"
#include "plan/plan.h"

namespace pto {

/// Every deduplicated step of the plan, reported where the duplicate is written, naming the original.
void lint_duplicate_steps(const Plan& plan, Diagnostics& diags);
void lint_duplicate_steps(const Workflow& wf, Diagnostics& diags);

/// A PTOAS sha256 or a 40-hex `git checkout` written into a file instead of coming from versions.env.
void lint_inline_literals(const std::string& path, const std::string& display, Diagnostics& diags);

/// `script-injection`: a `${{ }}` reading the github or inputs context (a branch name, a PR title: text an
/// outsider chooses) pasted into a `run:` script, where the shell reads it as code. Pass it through `env:`.
void lint_script_injection(const Workflow& wf, Diagnostics& diags);

/// `unused-model`: a models/ file no job's `models:` names (its examples never run; usually a typo or a
/// forgotten step).
void lint_unused_models(const Project& project, Diagnostics& diags);

/// `drift`: a workflow's steps (as `import` reads them) against the definitions of a project: a step the
/// definitions do not have, or a different card count, at the workflow's line; a definition the workflow does
/// not have, at the definition's line (a warning).
void lint_drift(const ImportResult& workflow, const std::string& workflow_display, const Project& project, const Plan& plan,
                Diagnostics& diags);

/// `expired-mute`: a `tests.mute` entry of runner.yml whose `until` is before `today` (YYYY-MM-DD): it mutes
/// nothing, and whoever reads runner.yml thinks it does.
void lint_expired_mutes(const RunnerConfig& cfg, const std::string& today, Diagnostics& diags);

/// Runs every rule over the project under `root` (its jobs/ and models/ files).
/// A model example whose script (the {dir}/{example} word of its command) is missing where the tree has its dir.
void lint_model_scripts(const Project& project, Diagnostics& diags);
void lint_project_files(const Project& project, const Plan& plan, Diagnostics& diags);

}  // namespace pto
