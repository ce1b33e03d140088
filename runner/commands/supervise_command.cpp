// `pto-runner supervise --dir DIR`: the host's step supervisor (supervise/supervisor.h). Hidden: only a daemon
// starts it, in its own session; a person never needs to.
#include "commands/commands.h"
#include "exec/cgroup_tree.h"
#include "supervise/supervisor.h"

namespace pto {

void register_supervise_command(CLI::App& app, CommonOptions&, int& exit_code) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("supervise", "The daemon's step supervisor (started by the daemon)");
  cmd->group("");  // hidden from --help
  auto sweep = std::make_shared<bool>(false);
  cmd->add_option("--dir", *dir, "Its directory: <state dir>/supervisor")->required();
  cmd->add_flag("--sweep", *sweep, "runner.yml containment: sweep (no cgroups)");
  cmd->callback([dir, sweep, &exit_code] {
    if (*sweep) CgroupTree::disable("runner.yml containment: sweep");
    exit_code = run_supervisor(*dir);
  });
}

}  // namespace pto
