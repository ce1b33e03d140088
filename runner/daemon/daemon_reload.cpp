// SIGHUP: the daemon reads runner.yml again. What can change while runs are active is applied and each
// difference logged; what cannot (where it listens, its state and lock directories, the source repository,
// containment, executor, slurm, sandbox users) is logged as needing a restart. A file with errors keeps every old setting.
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"
#include "util/token_file.h"

namespace pto {

namespace {
std::string text(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}
}  // namespace

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
  std::string next_token_path = resolve_under_root(opts_.load.root, !opts_.token_file.empty() ? opts_.token_file : next.token_file);
  if (next_token_path.empty()) next_token_path = state_dir() + "/token";
  std::string e;
  std::string token = read_private_token_file(next_token_path, e);
  if (!e.empty()) {
    spdlog::error("reload: {}; keeping the old settings", e);
    return "kept the old settings: " + e + "\n";
  }
  if (!access_.is_admin_token(token) || next_token_path != token_path_) say("token read again from " + next_token_path);
  access_.set_admin_token(token);
  token_path_ = next_token_path;

  for (const auto& change : host_->reconfigure(next)) say(change);
  if (next.device_type_all != cfg_.device_type_all || next.device_types != cfg_.device_types) say("card types changed");
  if (next.health.check != cfg_.health.check) say("health.check changed (new runs use it)");
  if (next.kill_grace_seconds != cfg_.kill_grace_seconds)
    say("kill-grace-seconds " + text(cfg_.kill_grace_seconds) + " -> " + text(next.kill_grace_seconds));
  if (next.log_max_bytes != cfg_.log_max_bytes) say("log-max-mb changed (new steps use it)");
  if (next.env != cfg_.env) say("env (runner.yml env, env-file) changed: new runs get it");
  if (next.shutdown_timeout_minutes != cfg_.shutdown_timeout_minutes)
    say("shutdown-timeout-minutes " + text(cfg_.shutdown_timeout_minutes) + " -> " + text(next.shutdown_timeout_minutes));
  if (next.retention.max_runs != cfg_.retention.max_runs || next.retention.max_age_days != cfg_.retention.max_age_days)
    say("retention max-runs " + std::to_string(next.retention.max_runs) + ", max-age-days " + text(next.retention.max_age_days));

  // Needs a restart: said, not applied.
  auto restart = [&](const char* key, const std::string& was, const std::string& now) {
    if (was != now) say(std::string(key) + " changed to '" + now + "': takes effect at the next start (now '" + was + "')");
  };
  restart("listen", cfg_.listen, next.listen);
  restart("request-timeout-seconds", text(cfg_.request_timeout_seconds), text(next.request_timeout_seconds));
  restart("max-connections-per-client", std::to_string(cfg_.max_connections_per_client), std::to_string(next.max_connections_per_client));
  restart("state-dir", cfg_.state_dir, next.state_dir);
  restart("devices.lock-dir", cfg_.lock_dir, next.lock_dir);
  restart("devices.lock-name", cfg_.lock_name, next.lock_name);
  restart("source.repo", cfg_.source.repo, next.source.repo);  // both resolved by resolve_host_dirs
  restart("containment", to_string(cfg_.containment), to_string(next.containment));
  restart("executor", to_string(cfg_.executor), to_string(next.executor));
  restart("supervise", cfg_.supervise ? "true" : "false", next.supervise ? "true" : "false");
  auto sandbox_users = [](const SandboxConfig& c) {
    std::string t = c.enabled ? c.users + "0.." + std::to_string(c.count - 1) + " groups=" : "off";
    for (const auto& g : c.groups) t += g + " ";
    return t;
  };
  restart("sandbox", sandbox_users(cfg_.sandbox), sandbox_users(next.sandbox));  // the pool keeps its users
  if (next.sandbox.pids_max != cfg_.sandbox.pids_max || next.sandbox.memory_max != cfg_.sandbox.memory_max)
    say("sandbox pids-max/memory-max changed (new runs use them)");
  if (next.max_cards_per_run != cfg_.max_cards_per_run) say("max-cards-per-run " + std::to_string(next.max_cards_per_run));
  auto priorities_text = [](const RunnerConfig& c) {
    std::string t;
    for (const auto& r : c.priorities) t += (t.empty() ? "" : ", ") + r.ref + "=" + std::to_string(r.priority);
    return t.empty() ? std::string("none") : t;
  };
  auto mutes_text = [](const TestsConfig& t) {
    std::string s = "max-muted=" + std::to_string(t.max_muted) + " window-days=" + text(t.window_days) + " retention-days=" + text(t.retention_days);
    for (const auto& m : t.mute) s += " " + m.id + "@" + m.until;
    return s;
  };
  if (mutes_text(next.tests) != mutes_text(cfg_.tests)) say("tests (mutes, max-muted, window, retention) changed: in force now");
  if (priorities_text(next) != priorities_text(cfg_)) say("priorities " + priorities_text(next) + " (runs submitted from now on)");
  if (next.supersede != cfg_.supersede)
    say(std::string("supersede ") + (next.supersede == Supersede::Off ? "off" : "pull-request") + " (runs submitted from now on)");
  auto slurm_text = [](const SlurmConfig& c) {
    std::string t = "partition=" + c.partition + " gres=" + c.gres + " max-cards=" + std::to_string(c.max_cards) + " args=";
    for (const auto& a : c.args) t += a + " ";
    t += "group-types=";
    for (const auto& g : c.group_types) t += g + " ";
    return t + "poll-seconds=" + std::to_string(c.poll_seconds);
  };
  restart("slurm", slurm_text(cfg_.slurm), slurm_text(next.slurm));  // the cluster object keeps what it started with

  // Live settings move over; the restart-only ones stay as the daemon started with them.
  RunnerConfig applied = cfg_;
  applied.device_ids = next.device_ids;
  applied.device_groups = next.device_groups;
  applied.device_type_all = next.device_type_all;
  applied.device_types = next.device_types;
  applied.health = next.health;
  applied.kill_grace_seconds = next.kill_grace_seconds;
  applied.log_max_bytes = next.log_max_bytes;
  applied.shutdown_timeout_minutes = next.shutdown_timeout_minutes;
  applied.retention = next.retention;
  applied.tests = next.tests;
  applied.token_file = next.token_file;
  applied.cache_dir = next.cache_dir;
  applied.toolchain_mirror = next.toolchain_mirror;
  applied.env = next.env;
  applied.env_file = next.env_file;
  applied.max_cards_per_run = next.max_cards_per_run;
  applied.sandbox.pids_max = next.sandbox.pids_max;
  applied.sandbox.memory_max = next.sandbox.memory_max;
  applied.priorities = next.priorities;
  applied.supersede = next.supersede;
  applied.main_ref = next.main_ref;
  notices_->reload(next, say);  // before cfg_ moves on: it compares with the receivers in force
  applied.notify = next.notify;
  cfg_ = applied;
  leases_->book.set_kill_grace(cfg_.kill_grace_seconds);
  mutes_->reconfigure(cfg_.tests);
  publish_mutes();
  view_changed();
  if (logged.empty()) say("runner.yml read again: nothing changed");
  retention_->prune(false);
  return logged;
}

}  // namespace pto
