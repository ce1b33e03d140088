// SIGHUP: the daemon reads runner.yml again (config/settings_reload: what moves over, what needs a restart)
// and hands each part its settings: the token, the cards, the receivers, the mutes, the leases' kill grace,
// retention. A file with errors keeps every old setting.
#include <spdlog/spdlog.h>

#include "config/settings_reload.h"
#include "daemon/daemon.h"
#include "server/admin_token.h"

namespace pto {


std::string Daemon::reload() {
  std::string logged;
  auto say = [&](const std::string& line) {
    spdlog::info("reload: {}", line);
    logged += line + "\n";
  };
  Diagnostics diags;
  RunnerConfig next = load_host_config(opts_.load, diags);
  std::string errors;
  for (const auto& d : diags.items())
    if (d.severity == Severity::Error) errors += "\n  " + format_diagnostic(d);
  if (!errors.empty()) {
    spdlog::error("reload: the host settings have errors; keeping the old ones:{}", errors);
    return "kept the old settings:" + errors + "\n";
  }
  resolve_host_dirs(next, opts_.load.root, opts_.lock_dir, opts_.state_dir);

  // The token: a configured file is read again (a rotated token takes effect now).
  AdminToken admin;
  bool bad_settings = false;
  if (std::string e = read_admin_token(opts_.load.root, opts_.token_file, next.token_file, state_dir(), false, admin, bad_settings); !e.empty()) {
    spdlog::error("reload: {}; keeping the old settings", e);
    return "kept the old settings: " + e + "\n";
  }
  if (!access_.is_admin_token(admin.token) || admin.path != access_.admin_token_file()) say("token read again from " + admin.path);
  access_.set_admin_token(admin.token, admin.path);

  for (const auto& change : host_->reconfigure(next)) say(change);
  SettingsReload r = reload_settings(cfg_, next);
  for (const auto& line : r.said) say(line);
  notices_->reload(next, say);  // it compares with the receivers in force
  cfg_ = r.applied;
  runs_->leases().book.set_kill_grace(cfg_.kill_grace_seconds);
  store_->reconfigure(cfg_.tests);
  view_changed();
  if (logged.empty()) say("runner.yml read again: nothing changed");
  store_->retention().prune(false);
  return logged;
}

}  // namespace pto
