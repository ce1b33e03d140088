#include "commands/commands.h"

#include <filesystem>
#include <iostream>

#include "lint/gha_workflow.h"
#include "importer/workflow_import.h"
#include "lint/drift_baseline.h"
#include "lint/lint.h"
#include "report/diagnostics_view.h"
#include "util/json_text.h"

namespace pto {

void register_lint_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    bool strict = false;
    std::string format = "text";
    std::vector<std::string> workflows;
    std::string against;
    std::string baseline;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("lint", "Validate jobs/, models/, toolchain/ (or GitHub workflow files)");
  cmd->add_flag("--strict", opts->strict, "Treat warnings (duplicate-step) as errors");
  cmd->add_option("--format", opts->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--workflow", opts->workflows, "Lint these GitHub Actions workflow files instead");
  cmd->add_option("--against", opts->against, "With --workflow: report drift between the workflow's steps and the "
                                              "definitions under this directory (jobs/, models/)");
  cmd->add_option("--baseline", opts->baseline, "With --against: a file of deliberate differences ({finding, reason}); they "
                                                "become notes, and an entry that matches no finding is an error (stale-baseline)");
  add_device_options(*cmd, common);
  add_footer(*cmd, "0 clean (warnings allowed without --strict); 1 lint errors (duplicate-step under --strict, "
                   "inline-toolchain-literal); 2 the files are invalid (YAML, schema, needs, cycles, devices) or "
                   "unreadable.");
  cmd->callback([opts, &common, &exit_code] {
    Diagnostics diags;
    if (!opts->workflows.empty()) {
      for (const auto& f : opts->workflows) {
        Workflow wf = load_workflow(f, f, diags);
        lint_duplicate_steps(wf, diags);
        lint_script_injection(wf, diags);
        if (std::filesystem::is_regular_file(f)) lint_inline_literals(f, f, diags);
        if (!opts->against.empty()) {
          ImportResult imported = import_workflow(f, f, diags);
          LoadOptions lo = common.load;
          lo.root = opts->against;
          Project project = load_project(lo, diags);
          Plan plan = build_plan(project, PlanOptions{}, diags);
          lint_drift(imported, f, project, plan, diags);
        }
      }
      if (!opts->baseline.empty()) {
        if (opts->against.empty()) {
          std::cerr << "pto-runner lint: --baseline needs --workflow FILE --against DIR\n";
          exit_code = to_int(ExitCode::BadInput);
          return;
        }
        apply_drift_baseline(load_drift_baseline(opts->baseline, opts->baseline, diags), opts->baseline, diags);
      }
    } else {
      Project project = load_project(common.load, diags);
      Plan plan = build_plan(project, PlanOptions{}, diags);
      lint_project_files(project, plan, diags);
    }
    if (opts->strict) diags.promote_warnings();
    diags.sort();
    if (opts->format == "json") {
      std::cout << json_without_workflow_commands(dump_json(diagnostics_to_json(diags), 2)) << "\n";
    } else {
      ActionsOutput out(stdout, inside_github_actions());
      print_findings(out, diags);
      std::fflush(stdout);
      int errors = 0, warnings = 0, notes = 0;
      for (const auto& d : diags.items()) (d.severity == Severity::Error ? errors : d.severity == Severity::Warning ? warnings : notes)++;
      std::cerr << "lint: " << errors << " error(s), " << warnings << " warning(s)" << (notes ? ", " + std::to_string(notes) + " note(s)" : "") << "\n";
    }
    exit_code = diags.has_input_errors() ? to_int(ExitCode::BadInput)
                : diags.has_errors()     ? to_int(ExitCode::Failure)
                                         : to_int(ExitCode::Success);
  });
}

}  // namespace pto
