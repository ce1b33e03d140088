#pragma once
// `pto-runner import --workflow ci.yml`: a GitHub Actions workflow whose device steps wrap
// `task-submit --device-num N --max-time T --timeout W --run "CMD"` turned into jobs/ and models/ files.
//
// Each job becomes jobs/<id>.yml with its needs, if, env, timeout, outputs and steps. A task-submit step becomes
// a step holding its cards itself: `devices` (from --device-num, or the ids of --device), `run-timeout-minutes`
// (--max-time), `queue-timeout-minutes` (--timeout), and CMD as `run` with the escapes of its double quotes
// undone; pypto's layout is mapped (`$GITHUB_WORKSPACE/<the job's checkout>` is the run's tree, other
// `$GITHUB_WORKSPACE/X` its sibling `../X`). Steps of one job that run the same script command on different
// examples (`python DIR/EXAMPLE.py ...`) are folded into models/<dir>.yml and a `models:` step. What has no
// equivalent (`uses:`, `services:`, `container:`, GitHub-only contexts) is listed with its line.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "importer/composite_action.h"

namespace pto {

struct ImportedFile {
  std::string path;  // jobs/NAME.yml or models/NAME.yml
  std::string text;
};

/// One step as the workflow runs it (after the task-submit call is undone), where it is written.
struct ImportedStep {
  std::string job, name, run;
  int devices = 0;
  bool task_submit = false;  // the workflow wrapped it in `task-submit ... --run`
  std::optional<double> timeout_minutes, queue_timeout_minutes, run_timeout_minutes;
  int line = 0, col = 0;
  std::map<std::string, std::string> env;  // its own `env:` as carried over
};

/// A job of the workflow as lint --against sees it: whether it is NPU work (a `runs-on` label `npu...` or a
/// task-submit call), and the card type its label names (`npu-a5` -> a5).
struct ImportedJob {
  std::string id;
  bool npu = false;        // it runs on NPU cards: a runs-on `npu...` label, or a task-submit call
  bool simulator = false;  // it runs the cards' simulators (pypto's `--platform=a5sim`): the daemon runs it, no card
  bool moves() const { return npu || simulator; }  // its work moves to pto-runner
  std::string card_type;
  bool bare_npu = false;  // its runs-on has the plain `npu` label: pypto's a2a3 hosts
  std::string runs_on;    // its labels as written, for messages: "[self-hosted, linux, arm64, npu]"
  std::vector<std::string> labels;  // the same, one by one
  std::map<std::string, std::string> env;  // its `env:` as carried over
  int line = 0, col = 0;
};

/// A local composite action a job's step uses, as read for the drift check (importer/composite_action).
struct ImportedComposite {
  std::string job, action;
  int line = 0, col = 0;  // its `uses:` in the workflow
  std::vector<CompositeStep> steps;
  std::set<std::string> unsets;
};

/// The jobs `--emit-workflow` turns into submits, each with the runs-on its emitted job takes (empty: its
/// own): an NPU job keeps its host; a simulator job goes to the NPU host (where the daemon's socket is).
std::map<std::string, std::vector<std::string>> submitted_jobs(const std::vector<ImportedJob>& jobs);

struct ImportResult {
  std::vector<ImportedFile> files;
  std::vector<ImportedComposite> composites;
  std::vector<ImportedStep> steps;
  std::vector<ImportedJob> jobs;  // every job with a run: step
  /// What could not be carried over, each at its line of the workflow (severity warning, rule "not-imported").
  Diagnostics not_carried;
};

/// Reads `path` (shown as `display`); YAML and structure errors go to `diags`.
ImportResult import_workflow(const std::string& path, const std::string& display, Diagnostics& diags);

}  // namespace pto
