// `pto-runner import --workflow ci.yml [--out DIR] [--force]`: a GitHub Actions workflow of task-submit steps
// turned into jobs/ and models/ files (importer/workflow_import), with what could not be carried over listed
// at its line.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "commands/commands.h"
#include "importer/workflow_import.h"
#include "report/diagnostics_view.h"

namespace fs = std::filesystem;

namespace pto {

void register_import_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::string workflow, out;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("import", "Turn a GitHub Actions workflow of task-submit steps into jobs/ and models/");
  cmd->add_option("--workflow", o->workflow, "The workflow file")->required();
  cmd->add_option("--out", o->out, "Where jobs/ and models/ go (default --root)");
  cmd->add_flag("--force", o->force, "Overwrite files that exist");
  cmd->footer("Exit codes: 0 imported (what could not be carried over is listed as warnings); 2 the workflow cannot be "
              "read, or a file exists (without --force).");
  cmd->callback([o, &common, &exit_code] {
    Diagnostics diags;
    ImportResult r = import_workflow(o->workflow, o->workflow, diags);
    if (diags.has_errors()) {
      diags.sort();
      std::cerr << diagnostics_to_text(diags);
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    const fs::path out = o->out.empty() ? fs::path(common.load.root) : fs::path(o->out);
    if (!o->force)
      for (const auto& f : r.files)
        if (fs::exists(out / f.path)) {
          std::cerr << "pto-runner import: " << (out / f.path).string() << " exists; nothing written (--force overwrites)\n";
          exit_code = to_int(ExitCode::BadInput);
          return;
        }
    for (const auto& f : r.files) {
      fs::create_directories((out / f.path).parent_path());
      std::ofstream(out / f.path) << f.text;
      std::cout << "wrote " << (out / f.path).string() << "\n";
    }
    r.not_carried.sort();
    if (!r.not_carried.items().empty())
      std::cout << "\nnot carried over (" << r.not_carried.items().size() << "):\n" << diagnostics_to_text(r.not_carried);
    exit_code = 0;
  });
}

}  // namespace pto
