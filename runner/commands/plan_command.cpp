#include "commands/commands.h"

#include <iostream>

#include "report/actions_output.h"
#include "report/plan_view.h"
#include "util/json_text.h"

namespace pto {

void register_plan_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::vector<std::string> jobs;
    std::string format = "text";
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("plan", "Print the expanded plan: lead job, jobs in dependency order, matrix "
                                         "legs, steps, device requests, deduplicated steps");
  cmd->add_option("--job", opts->jobs, "Only these jobs (and the jobs they need)");
  cmd->add_option("--format", opts->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  add_device_options(*cmd, common);
  add_footer(*cmd, "0 printed; 2 bad usage or bad input files (each finding with its file, line and column).");
  cmd->callback([opts, &common, &exit_code] {
    auto loaded = load_plan_or_report(common, opts->jobs);
    if (!loaded) {
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    apply_history(*loaded);
    // Step names and commands are the definitions' text: inside Actions never a workflow command.
    if (opts->format == "json") {
      std::cout << json_without_workflow_commands(dump_json(plan_to_json(loaded->plan), 2)) << "\n";
    } else {
      ActionsOutput out(stdout, inside_github_actions());
      out.text(plan_to_text(loaded->plan));
    }
    exit_code = 0;
  });
}

}  // namespace pto
