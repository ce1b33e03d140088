// `pto-runner import --workflow ci.yml [--out DIR] [--force]`: a GitHub Actions workflow of task-submit steps
// turned into jobs/ and models/ files (importer/workflow_import), with what could not be carried over listed
// at its line.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "commands/commands.h"
#include "importer/workflow_emitter.h"
#include "importer/workflow_import.h"
#include "report/diagnostics_view.h"

namespace fs = std::filesystem;

namespace pto {

void register_import_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::string workflow, out, emit, socket = "/run/pto-runner/api.sock";
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("import", "Turn a GitHub Actions workflow of task-submit steps into jobs/ and models/");
  cmd->add_option("--workflow", o->workflow, "The workflow file")->required();
  cmd->add_option("--out", o->out, "Where jobs/ and models/ go (default --root)");
  cmd->add_flag("--force", o->force, "Overwrite files that exist");
  cmd->add_option("--emit-workflow", o->emit, "Also write the workflow to merge: the same one with each NPU job's steps "
                                              "replaced by one `pto-runner submit --job NAME --attach`");
  cmd->add_option("--socket", o->socket, "With --emit-workflow: the daemon's listen-unix socket the jobs submit over");
  add_footer(*cmd, "0 imported (what could not be carried over is listed as warnings); 2 the workflow cannot be read, "
                   "or a file exists (without --force).");
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
    // The pin the workflow's toolchain job reads (pypto's toolchain/versions.env), when the tree has none yet:
    // without it the imported tree cannot plan.
    const fs::path wf_dir = fs::absolute(o->workflow).parent_path();
    const fs::path repo = wf_dir.filename() == "workflows" && wf_dir.parent_path().filename() == ".github" ? wf_dir.parent_path().parent_path() : wf_dir;
    if (fs::is_regular_file(repo / "toolchain/versions.env") && !fs::exists(out / "toolchain/versions.env")) {
      std::error_code ec;
      fs::create_directories(out / "toolchain", ec);
      fs::copy_file(repo / "toolchain/versions.env", out / "toolchain/versions.env", ec);
      if (!ec) std::cout << "copied " << (repo / "toolchain/versions.env").string() << " to " << (out / "toolchain/versions.env").string() << "\n";
    }
    if (!o->emit.empty()) {
      const auto submitted = submitted_jobs(r.jobs);
      const std::string text = emit_switch_workflow(o->workflow, o->workflow, submitted, o->socket, diags);
      if (text.empty() || diags.has_errors()) {
        std::cerr << diagnostics_to_text(diags);
        exit_code = to_int(ExitCode::BadInput);
        return;
      }
      std::ofstream(o->emit) << text;
      std::size_t npu = 0;
      for (const auto& j : r.jobs) npu += j.npu && submitted.count(j.id);
      const std::size_t simulators = submitted.size() - npu;
      std::cout << "wrote " << o->emit << " (" << npu << " NPU job(s)"
                << (simulators ? " and " + std::to_string(simulators) + " simulator job(s)" : std::string()) << " submit to pto-runner)\n";
    }
    r.not_carried.sort();
    if (!r.not_carried.items().empty())
      std::cout << "\nnot carried over (" << r.not_carried.items().size() << "):\n" << diagnostics_to_text(r.not_carried);
    exit_code = 0;
  });
}

}  // namespace pto
