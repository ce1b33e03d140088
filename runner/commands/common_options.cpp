#include "commands/common_options.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "client/api_client.h"
#include "report/diagnostics_view.h"
#include "store/learned_durations.h"
#include "util/state_paths.h"

namespace pto {

namespace {
const std::string kInstalledConfig = "/etc/pto-runner/runner.yml";
}  // namespace

void add_common_options(CLI::App& app, CommonOptions& opts) {
  app.add_option("--root", opts.load.root, "Project directory holding jobs/, models/, toolchain/")
      ->capture_default_str();
  app.add_option("--config", opts.load.config_file,
                 "Host settings file (default: ROOT/runner.yml when present; the client commands status, submit, devices, "
                 "tests and bisect look first at $PTO_RUNNER_CONFIG and last at /etc/pto-runner/runner.yml)");
}

void add_daemon_options(CLI::App& cmd, std::string& server, std::string& token_file, const std::string& token_use) {
  cmd.add_option("--server", server,
                 "The daemon: http(s)://HOST:PORT or unix:PATH (default $PTO_RUNNER_SERVER, else the listen-unix or listen "
                 "of runner.yml: --config, $PTO_RUNNER_CONFIG, ROOT/runner.yml, /etc/pto-runner/runner.yml)");
  cmd.add_option("--token-file", token_file,
                 "Bearer token file, " + token_use + " (default $PTO_RUNNER_TOKEN, else that runner.yml's token-file or "
                 "STATE-DIR/token where this user may read it)");
}

void add_footer(CLI::App& cmd, const std::string& exit_codes, const std::string& note) {
  std::string path = cmd.get_name();  // `toolchain setup`, not `setup`
  for (const CLI::App* up = cmd.get_parent(); up && up->get_parent(); up = up->get_parent()) path = up->get_name() + " " + path;
  cmd.footer((note.empty() ? "" : note + "\n") + "Exit codes: " + exit_codes +
             "\nBefore the command: --root DIR (the definitions, default .) and --config FILE (runner.yml), e.g. "
             "pto-runner --root DIR " + path + " ...");
}

void inherit_footers(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_footer().empty() && app.get_parent() != nullptr) sub->footer(app.get_footer());
    inherit_footers(*sub);
  }
}

void add_device_options(CLI::App& cmd, CommonOptions& opts) {
  cmd.add_option("--devices", opts.load.devices_override,
                 "NPU cards: 8 (ids 0-7), 0-7, 0,1,4,5, or typed a2a3:0-7,a5:8-9 (overrides runner.yml devices)");
  cmd.add_option("--device-groups", opts.load.device_groups_override,
                 "Cards that may serve one multi-card step together, e.g. \"0,1;2,3\"");
}

void apply_history(LoadedPlan& lp, const std::string& state_dir_flag) {
  std::string dir = resolve_under_root(lp.project.root, state_dir_flag.empty() ? lp.project.runner.state_dir : state_dir_flag);
  if (auto journal = Journal::open_readonly(journal_file(dir))) apply_learned_durations(lp.plan, *journal);
}

std::string host_config_file(const CommonOptions& opts) {
  if (!opts.load.config_file.empty()) return opts.load.config_file;
  // As KUBECONFIG or DOCKER_CONFIG: a host whose settings live elsewhere, named once for every command.
  if (const char* env = std::getenv("PTO_RUNNER_CONFIG"); env && *env) return env;
  const std::filesystem::path here = std::filesystem::path(opts.load.root) / "runner.yml";
  if (std::filesystem::exists(here)) return here.string();
  // An installed host's (packaging/runner.yml): on-call types commands anywhere on it.
  if (std::filesystem::exists(kInstalledConfig)) return kInstalledConfig;
  return "";
}

std::string where_daemons_are_looked_for(const CommonOptions& opts) {
  return "no --server, no $PTO_RUNNER_SERVER, no --config FILE nor $PTO_RUNNER_CONFIG, no runner.yml in " + opts.load.root +
         ", none at " + kInstalledConfig;
}

std::string client_token(const std::string& token_file_flag, const CommonOptions& opts, std::string& error) {
  if (!token_file_flag.empty() || std::getenv("PTO_RUNNER_TOKEN")) return read_token(token_file_flag, error);
  const std::string cfg = host_config_file(opts);
  if (cfg.empty()) return "";
  Diagnostics ignored;
  RunnerConfig rc = load_runner_config(cfg, cfg, ignored);
  if (ignored.has_errors()) return "";
  resolve_host_dirs(rc, opts.load.root, "", "");
  const std::string own = rc.token_file.empty() ? rc.state_dir + "/token" : resolve_under_root(opts.load.root, rc.token_file);
  if (::access(own.c_str(), R_OK) != 0) return "";
  return read_token(own, error);
}

std::string server_url(const std::string& flag, const CommonOptions& opts) {
  std::string url = flag;
  if (url.empty())
    if (const char* env = std::getenv("PTO_RUNNER_SERVER")) url = env;
  if (url.empty()) {
    const std::string cfg = host_config_file(opts);
    std::string listen = RunnerConfig{}.listen, listen_unix;
    if (!cfg.empty()) {
      Diagnostics ignored;  // a broken runner.yml is the daemon's problem; fall back to the default address
      RunnerConfig rc = load_runner_config(cfg, cfg, ignored);
      if (!ignored.has_errors()) listen = rc.listen, listen_unix = rc.listen_unix;
    }
    // Its Unix socket first, where this user may use it: the kernel names both ends there, and no TCP port is
    // involved (SPEC "A step cannot take the daemon's place").
    if (!listen_unix.empty() && ::access(listen_unix.c_str(), W_OK) == 0) return "unix:" + listen_unix;
    std::string address;
    unsigned short port = 0;
    auto colon = listen.rfind(':');
    address = listen.substr(0, colon);
    port = static_cast<unsigned short>(std::atoi(listen.substr(colon + 1).c_str()));
    if (address == "0.0.0.0" || address == "::" || address == "[::]" || address.empty()) address = "127.0.0.1";
    url = "http://" + address + ":" + std::to_string(port);
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
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
    ActionsOutput out(stderr, inside_github_actions());  // a message quotes the files: never a workflow command
    print_findings(out, errors);
    out.text("pto-runner: " + std::to_string(errors.items().size()) + " problem(s) in the definitions; nothing was run\n");
    return std::nullopt;
  }
  return lp;
}

}  // namespace pto
