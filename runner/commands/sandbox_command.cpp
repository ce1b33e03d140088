#include <iostream>

#include "commands/commands.h"
#include "sandbox/sandbox_pool.h"

namespace pto {

void register_sandbox_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto* cmd = app.add_subcommand("sandbox", "Make or remove the sandbox users steps run as (runner.yml sandbox: users, count, groups)");
  cmd->require_subcommand(1);
  add_footer(*cmd, "0 done; 2 runner.yml has errors or sandbox: off; 3 useradd or userdel failed.", "As root.");
  auto* setup = cmd->add_subcommand("setup", "Make the missing sandbox users (system users without a home or a shell, each in its own group)");
  auto* remove = cmd->add_subcommand("remove", "Remove the sandbox users");
  auto act = [&common, &exit_code](bool make) {
    Diagnostics diags;
    Project project = load_project(common.load, diags);
    for (const auto& d : diags.items())
      if (d.severity == Severity::Error && (d.file == project.runner.file || d.file == "(command line)")) {
        std::cerr << format_diagnostic(d) << "\n";
        exit_code = 2;
      }
    if (exit_code) return;
    const SandboxConfig& sb = project.runner.sandbox;
    if (!sb.enabled) {
      std::cerr << "pto-runner sandbox: runner.yml says sandbox: off; nothing to " << (make ? "make" : "remove") << "\n";
      exit_code = 2;
      return;
    }
    std::string error;
    for (const auto& line : make ? setup_sandbox_users(sb, project.runner.caches.group, error) : remove_sandbox_users(sb, project.runner.caches.group, error)) std::cout << line << "\n";
    if (!error.empty()) {
      std::cerr << "pto-runner sandbox: " << error << "\n";
      exit_code = 3;
    }
  };
  setup->callback([act] { act(true); });
  remove->callback([act] { act(false); });
}

}  // namespace pto
