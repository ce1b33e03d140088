#include <iostream>

#include "commands/commands.h"
#include "doctor/doctor.h"
#include "util/json_text.h"

namespace pto {

void register_doctor_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::string format = "text", token_file, lock_dir, state_dir;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("doctor", "Check this host against what pto-runner and pypto's jobs need, with the fix for each problem");
  cmd->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--token-file", o->token_file, "The admin token file serve uses (default runner.yml token-file)");
  cmd->add_option("--lock-dir", o->lock_dir, "Card lock directory (overrides runner.yml devices.lock-dir)");
  cmd->add_option("--state-dir", o->state_dir, "State directory (overrides runner.yml state-dir)");
  add_device_options(*cmd, common);
  add_footer(*cmd, "0 every check ok; 1 warnings; 2 a check failed (or runner.yml has errors).", "Looks, changes nothing.");
  cmd->callback([o, &common, &exit_code] {
    Diagnostics diags;
    Project project = load_project(common.load, diags);
    // The host's settings must load; the definitions may be absent (a host serving commits of a repository).
    std::string host_errors;
    for (const auto& d : diags.items())
      if (d.severity == Severity::Error && (d.file == project.runner.file || d.file == project.runner.env_file || d.file == "(command line)"))
        host_errors += format_diagnostic(d) + "\n";
    if (!host_errors.empty()) {
      std::cerr << host_errors;
      exit_code = 2;
      return;
    }
    resolve_host_dirs(project.runner, project.root, o->lock_dir, o->state_dir);
    DoctorReport report = run_doctor(project, DoctorOptions{o->token_file});
    if (o->format == "json") {
      nlohmann::json checks = nlohmann::json::array();
      for (const auto& c : report.checks)
        checks.push_back({{"check", c.name}, {"status", to_string(c.status)}, {"detail", c.detail}, {"fix", c.fix}});
      std::cout << dump_json({{"checks", checks}, {"exit_code", report.exit_code()}}, 2) << "\n";
    } else {
      for (const auto& c : report.checks) {
        std::printf("%-5s %-10s %s\n", to_string(c.status).c_str(), c.name.c_str(), c.detail.c_str());
        if (!c.fix.empty()) std::printf("      %-10s fix: %s\n", "", c.fix.c_str());
      }
    }
    exit_code = report.exit_code();
  });
}

}  // namespace pto
