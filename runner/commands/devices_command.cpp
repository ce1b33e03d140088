#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "util/api_paths.h"
#include "commands/commands.h"
#include "config/device_spec.h"
#include "sched/device_pool.h"
#include "store/state_dir_lock.h"
#include "util/json_text.h"

namespace fs = std::filesystem;

namespace pto {

// `devices`: list cards (state, lock holder, drain reason) and drain or return one to service. It asks the
// daemon, which owns the cards while it runs, found as every client finds it (--server, $PTO_RUNNER_SERVER,
// or the host's runner.yml whose state dir a daemon holds: commands/common_options); with no daemon it works
// on that runner.yml's (or --devices') cards directly, through the state dir's devices.json and the lock
// directory, for hosts that only use `run`. With neither it acts on nothing: exit 2, saying where it looked.
void register_devices_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::string server, token_file, state_dir, lock_dir, reason = "drained by an operator";
    int undrain = -1, drain = -1;
    std::string drain_node, undrain_node;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("devices", "List NPU cards with their state and holder; drain one or return it to service");
  add_device_options(*cmd, common);
  cmd->add_option("--undrain", o->undrain, "Return this card to service");
  cmd->add_option("--drain", o->drain, "Take this card out of service");
  cmd->add_option("--reason", o->reason, "Why, with --drain or --drain-node");
  cmd->add_option("--drain-node", o->drain_node, "executor: slurm, with --server: drain this Slurm node (scontrol)");
  cmd->add_option("--undrain-node", o->undrain_node, "executor: slurm, with --server: resume this Slurm node");
  cmd->add_option("--server", o->server,
                  "The daemon to ask (default $PTO_RUNNER_SERVER, else the daemon holding the state dir of runner.yml: --config, "
                  "$PTO_RUNNER_CONFIG, ROOT/runner.yml or /etc/pto-runner/runner.yml)");
  cmd->add_option("--token-file", o->token_file, "With --server: bearer token file, the admin token or a read token for a daemon beyond loopback (default $PTO_RUNNER_TOKEN)");
  cmd->add_option("--state-dir", o->state_dir, "Without --server: the state dir (default runner.yml state-dir)");
  cmd->add_option("--lock-dir", o->lock_dir, "Without --server: the lock dir (default runner.yml devices.lock-dir)");
  add_footer(*cmd, "0 done; 2 bad usage, no such card, or no daemon and no cards to act on (it says where it "
              "looked); 3 the daemon cannot be reached, or its address is served by another user.",
             "Without a daemon it works on the cards of runner.yml (or --devices) through the state dir and the lock directory.");
  cmd->callback([o, &common, &exit_code] {
    std::string server = o->server;
    const std::string& token_file = o->token_file;
    if (server.empty())
      if (const char* env = std::getenv("PTO_RUNNER_SERVER")) server = env;
    const std::string config = host_config_file(common);
    if (server.empty() && !config.empty()) {
      // A daemon holding that host's state dir owns its cards: asked where it listens, with its token.
      Diagnostics ignored;
      RunnerConfig rc = load_runner_config(config, config, ignored);
      resolve_host_dirs(rc, common.load.root, o->lock_dir, o->state_dir);
      if (!state_dir_holder(rc.state_dir).empty()) server = server_url("", common);
    }
    if (server.empty() && config.empty() && common.load.devices_override.empty()) {
      std::cerr << "pto-runner devices: no daemon and no cards to act on: " << where_daemons_are_looked_for(common)
                << "; give --server URL, or --devices for this host's cards\n";
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    if (!server.empty()) {
      server = trim_server(server);
      std::string err;
      const std::string token = client_token(token_file, common, err);
      if (!err.empty()) {
        std::cerr << "pto-runner devices: " << err << "\n";
        exit_code = to_int(ExitCode::BadInput);
        return;
      }
      if (o->drain >= 0 || o->undrain >= 0 || !o->drain_node.empty() || !o->undrain_node.empty()) {
        int card = o->drain >= 0 ? o->drain : o->undrain;
        std::string path = !o->drain_node.empty()     ? api_path::node(o->drain_node, "drain")
                           : !o->undrain_node.empty() ? api_path::node(o->undrain_node, "undrain")
                                                      : api_path::device(card, o->drain >= 0 ? "drain" : "undrain");
        ApiResponse r = api_request("POST", server + path, token, dump_json({{"reason", o->reason}}));
        if (!r.reached) {
          std::cerr << "pto-runner devices: " << r.error << "\n";
          exit_code = to_int(ExitCode::Infrastructure);
          return;
        }
        if (r.status != 200) {
          std::cerr << "pto-runner devices: HTTP " << r.status << ": " << r.body << "\n";
          exit_code = r.status == 404 || r.status == 401 ? to_int(ExitCode::BadInput) : to_int(ExitCode::Infrastructure);
          return;
        }
      }
      nlohmann::json s;
      if (!fetch_status(server, token, s, err)) {
        std::cerr << "pto-runner devices: " << err << "\n";
        exit_code = to_int(ExitCode::Infrastructure);
        return;
      }
      for (const auto& d : s["devices"]) {
        std::string detail = d["holder"].is_object() ? d["holder"].value("label", "") : "";
        if (d["drain_reason"].is_string()) detail = d["drain_reason"];
        std::string type = d.contains("type") && d["type"].is_string() ? d["type"].get<std::string>() : "-";
        std::printf("%-4d %-6s %-9s %s\n", d.value("id", 0), type.c_str(), d.value("state", "?").c_str(), detail.c_str());
      }
      exit_code = 0;
      return;
    }
    Diagnostics diags;
    LoadOptions load = common.load;
    load.config_file = config;  // an installed host's too
    Project project = load_project(load, diags);
    RunnerConfig cfg = project.runner;
    resolve_host_dirs(cfg, project.root, o->lock_dir, o->state_dir);
    const std::string& sd = cfg.state_dir;
    if (o->drain >= 0 || o->undrain >= 0) {
      // A running daemon owns the cards and keeps its drains in memory: a change here would be ignored.
      if (std::string pid = state_dir_holder(sd); !pid.empty()) {
        std::cerr << "pto-runner devices: a pto-runner serve (pid " << pid << ") holds the state dir " << sd
                  << "; ask it with --server URL (or $PTO_RUNNER_SERVER)\n";
        exit_code = to_int(ExitCode::BadInput);
        return;
      }
    }
    DevicePool pool(cfg, sd);
    if (std::string err = pool.init(); !err.empty()) {
      std::cerr << "pto-runner devices: " << err << "\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    for (int card : {o->drain, o->undrain})
      if (card >= 0 && !pool.has_card(card)) {
        std::cerr << "pto-runner devices: no card " << card << " (cards: " << join_ids(cfg.device_ids) << ")\n";
        exit_code = to_int(ExitCode::BadInput);
        return;
      }
    if (o->drain >= 0) pool.drain(o->drain, o->reason);
    if (o->undrain >= 0) pool.undrain(o->undrain);
    for (const auto& c : pool.status()) {
      std::string holder;
      bool locked = CardLock::held_elsewhere(pool.lock_dir(), c.id, holder, pool.lock_name());
      std::string state = c.state == CardState::Drained ? "drained" : locked ? "busy" : "free";
      std::string detail = c.state == CardState::Drained ? c.drain_reason : locked ? holder : "";
      std::printf("%-4d %-6s %-9s %s\n", c.id, c.type.empty() ? "-" : c.type.c_str(), state.c_str(), detail.c_str());
    }
    exit_code = 0;
  });
}

}  // namespace pto
