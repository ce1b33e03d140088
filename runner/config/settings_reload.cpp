#include "config/settings_reload.h"

namespace pto {

namespace {
std::string text(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}
}  // namespace

SettingsReload reload_settings(const RunnerConfig& now, const RunnerConfig& next) {
  SettingsReload out;
  auto say = [&](const std::string& line) { out.said.push_back(line); };
  if (next.device_type_all != now.device_type_all || next.device_types != now.device_types) say("card types changed");
  if (next.health.check != now.health.check) say("health.check changed (new runs use it)");
  if (next.kill_grace_seconds != now.kill_grace_seconds)
    say("kill-grace-seconds " + text(now.kill_grace_seconds) + " -> " + text(next.kill_grace_seconds));
  if (next.log_max_bytes != now.log_max_bytes) say("log-max-mb changed (new steps use it)");
  if (next.env != now.env) say("env (runner.yml env, env-file) changed: new runs get it");
  if (next.shutdown_timeout_minutes != now.shutdown_timeout_minutes)
    say("shutdown-timeout-minutes " + text(now.shutdown_timeout_minutes) + " -> " + text(next.shutdown_timeout_minutes));
  if (next.retention.max_runs != now.retention.max_runs || next.retention.max_age_days != now.retention.max_age_days)
    say("retention max-runs " + std::to_string(next.retention.max_runs) + ", max-age-days " + text(next.retention.max_age_days));
  {
    const CachesConfig &a = now.caches, &b = next.caches;
    if (a.dir != b.dir || a.protected_refs != b.protected_refs || a.max_size != b.max_size || a.pr_max_age_days != b.pr_max_age_days ||
        a.group != b.group || a.remote_url != b.remote_url || a.remote_credential_file != b.remote_credential_file)
      say("caches changed: new runs use them");
  }

  // Needs a restart: said, not applied.
  auto restart = [&](const char* key, const std::string& was, const std::string& will) {
    if (was != will) say(std::string(key) + " changed to '" + will + "': takes effect at the next start (now '" + was + "')");
  };
  restart("listen", now.listen, next.listen);
  restart("request-timeout-seconds", text(now.request_timeout_seconds), text(next.request_timeout_seconds));
  restart("max-connections-per-client", std::to_string(now.max_connections_per_client), std::to_string(next.max_connections_per_client));
  restart("state-dir", now.state_dir, next.state_dir);
  restart("devices.lock-dir", now.lock_dir, next.lock_dir);
  restart("devices.lock-name", now.lock_name, next.lock_name);
  restart("source.repo", now.source.repo, next.source.repo);  // both resolved by resolve_host_dirs
  restart("containment", to_string(now.containment), to_string(next.containment));
  restart("executor", to_string(now.executor), to_string(next.executor));
  restart("supervise", now.supervise ? "true" : "false", next.supervise ? "true" : "false");
  auto sandbox_users = [](const SandboxConfig& c) {
    std::string t = c.enabled ? c.users + "0.." + std::to_string(c.count - 1) + " groups=" : "off";
    for (const auto& g : c.groups) t += g + " ";
    return t;
  };
  restart("sandbox", sandbox_users(now.sandbox), sandbox_users(next.sandbox));  // the pool keeps its users
  if (next.sandbox.pids_max != now.sandbox.pids_max || next.sandbox.memory_max != now.sandbox.memory_max)
    say("sandbox pids-max/memory-max changed (new runs use them)");
  if (next.max_cards_per_run != now.max_cards_per_run) say("max-cards-per-run " + std::to_string(next.max_cards_per_run));
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
  if (mutes_text(next.tests) != mutes_text(now.tests)) say("tests (mutes, max-muted, window, retention) changed: in force now");
  if (priorities_text(next) != priorities_text(now)) say("priorities " + priorities_text(next) + " (runs submitted from now on)");
  if (next.supersede != now.supersede)
    say(std::string("supersede ") + (next.supersede == Supersede::Off ? "off" : "pull-request") + " (runs submitted from now on)");
  auto slurm_text = [](const SlurmConfig& c) {
    std::string t = "partition=" + c.partition + " gres=" + c.gres + " max-cards=" + std::to_string(c.max_cards) + " args=";
    for (const auto& a : c.args) t += a + " ";
    t += "group-types=";
    for (const auto& g : c.group_types) t += g + " ";
    return t + "poll-seconds=" + std::to_string(c.poll_seconds);
  };
  restart("slurm", slurm_text(now.slurm), slurm_text(next.slurm));  // the cluster object keeps what it started with

  // Live settings move over; the restart-only ones stay as the daemon started with them.
  RunnerConfig applied = now;
  applied.device_ids = next.device_ids;
  applied.device_groups = next.device_groups;
  applied.device_type_all = next.device_type_all;
  applied.device_types = next.device_types;
  applied.health = next.health;
  applied.kill_grace_seconds = next.kill_grace_seconds;
  applied.log_max_bytes = next.log_max_bytes;
  applied.shutdown_timeout_minutes = next.shutdown_timeout_minutes;
  applied.retention = next.retention;
  applied.caches = next.caches;
  applied.reuse_max_age_days = next.reuse_max_age_days;
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
  applied.notify = next.notify;  // its receivers' differences are the notices' to say
  out.applied = applied;
  return out;
}

std::optional<RunnerConfig> reread_host_settings(const LoadOptions& load, const std::string& lock_dir, const std::string& state_dir,
                                                 std::string& errors) {
  Diagnostics diags;
  RunnerConfig next = load_host_config(load, diags);
  for (const auto& d : diags.items())
    if (d.severity == Severity::Error) errors += "\n  " + format_diagnostic(d);
  if (!errors.empty()) return std::nullopt;
  resolve_host_dirs(next, load.root, lock_dir, state_dir);
  return next;
}

}  // namespace pto
