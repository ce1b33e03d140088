#include "commands/common_options.h"

#include <iostream>

#include "report/diagnostics_view.h"

namespace pto {

void add_common_options(CLI::App& app, CommonOptions& opts) {
  app.add_option("--root", opts.load.root, "Project directory holding jobs/, models/, toolchain/")
      ->capture_default_str();
  app.add_option("--config", opts.load.config_file, "Host settings file (default: ROOT/runner.yml when present)");
}

void add_device_options(CLI::App& cmd, CommonOptions& opts) {
  cmd.add_option("--devices", opts.load.devices_override, "NPU cards: 8 (ids 0-7), 0-7, or 0,1,4,5");
  cmd.add_option("--device-groups", opts.load.device_groups_override,
                 "Cards that may serve one multi-card step together, e.g. \"0,1;2,3\"");
}

std::optional<LoadedPlan> load_plan_or_report(const CommonOptions& opts, const std::vector<std::string>& jobs) {
  Diagnostics diags;
  LoadedPlan lp;
  lp.project = load_project(opts.load, diags);
  if (!diags.has_input_errors()) lp.plan = build_plan(lp.project, PlanOptions{jobs, ""}, diags);
  if (diags.has_input_errors()) {
    Diagnostics errors;
    for (const auto& d : diags.items())
      if (d.severity == Severity::Error) errors.add(d);
    errors.sort();
    std::cerr << diagnostics_to_text(errors);
    std::cerr << "pto-runner: " << errors.items().size() << " problem(s) in the definitions; nothing was run\n";
    return std::nullopt;
  }
  return lp;
}

}  // namespace pto
