#include "engine/engine_options.h"

#include <ctime>
#include <filesystem>

#include "config/project.h"
#include "testcases/mutes.h"
#include "util/process_env.h"
#include "util/ids.h"
#include "util/random_hex.h"
#include "util/state_paths.h"

namespace fs = std::filesystem;

namespace pto {

EngineOptions make_engine_options(const std::string& root, const std::string& state_dir, const RunnerConfig& cfg, bool simulate, double time_scale,
                                  InheritedEnv inherit) {
  EngineOptions eo;
  eo.run_id = new_run_id();
  eo.root = fs::absolute(root).lexically_normal().string();
  eo.run_dir = run_dir(state_dir, eo.run_id);
  eo.simulate = simulate;
  eo.time_scale = simulate ? time_scale : 1;
  eo.kill_grace_seconds = cfg.kill_grace_seconds;
  eo.log_max_bytes = cfg.log_max_bytes;
  eo.base_env = environment_map("PTO_RUNNER_");
  if (inherit == InheritedEnv::AllowList)
    for (auto it = eo.base_env.begin(); it != eo.base_env.end();)
      it = allowed_inherited_name(it->first) ? std::next(it) : eo.base_env.erase(it);
  for (const auto& [k, v] : cfg.env) eo.base_env[k] = v;  // the host's env and env-file, over the runner's own
  eo.path_first = ensure_tools_dir(state_dir);
  eo.self_exe = self_executable();
  // The lead job's host settings, resolved here once: it then reads nothing of the host from ROOT.
  eo.toolchain_args = "--cache-dir " + shell_quote(resolve_under_root(eo.root, cfg.cache_dir));
  if (!cfg.toolchain_mirror.empty())
    eo.toolchain_args += " --mirror " + shell_quote(cfg.toolchain_mirror.find("://") == std::string::npos
                                                        ? resolve_under_root(eo.root, cfg.toolchain_mirror)
                                                        : cfg.toolchain_mirror);
  eo.health = cfg.health;
  eo.max_report_bytes = static_cast<std::size_t>(cfg.tests.max_report_bytes);
  eo.max_report_cases = static_cast<std::size_t>(cfg.tests.max_cases);
  // runner.yml's mutes; a daemon puts its own in (the API's as well), kept current.
  eo.muted = [mutes = TestMutes(cfg.tests.mute, {}, cfg.tests.max_muted)](const std::string& id) { return mutes.match(id, utc_date()); };
  // Used once a sandbox user is lent (RunEngine::run_as): without one a step runs as the daemon, unlimited.
  eo.limits = {cfg.sandbox.pids_max, cfg.sandbox.memory_max};
  eo.card_files = cfg.card_files;
  return eo;
}

bool allowed_inherited_name(const std::string& name) {
  static const char* const names[] = {"PATH",       "HOME",           "USER",        "LOGNAME",     "SHELL",      "LANG",
                                      "LANGUAGE",   "TZ",             "TERM",        "SLURM_CONF",  "SLURM_CLUSTERS",
                                      "http_proxy", "https_proxy",    "no_proxy",    "HTTP_PROXY",  "HTTPS_PROXY",
                                      "NO_PROXY",   "all_proxy",      "ALL_PROXY"};
  for (const char* n : names)
    if (name == n) return true;
  return name.rfind("LC_", 0) == 0;
}

std::string ensure_tools_dir(const std::string& state_dir) {
  const fs::path target = fs::path(self_executable()).parent_path() / "pto-task-submit";
  std::error_code ec;
  if (!fs::exists(target, ec)) return "";
  const fs::path dir = fs::path(state_dir) / "tools", link = dir / "task-submit";
  fs::create_directories(dir, ec);
  if (fs::read_symlink(link, ec) != target) {
    // Made beside and renamed over: a concurrent run never sees the link missing.
    const fs::path tmp = dir / ("task-submit.tmp-" + random_hex(4));
    fs::create_symlink(target, tmp, ec);
    if (!ec) fs::rename(tmp, link, ec);
    if (ec) {
      fs::remove(tmp, ec);
      return fs::exists(link) ? dir.string() : "";
    }
  }
  return dir.string();
}

std::string format_minutes(double minutes) {
  char buf[32];
  if (minutes >= 1 && minutes == static_cast<long>(minutes)) std::snprintf(buf, sizeof(buf), "%ld min", static_cast<long>(minutes));
  else std::snprintf(buf, sizeof(buf), "%.3g s", minutes * 60);
  return buf;
}

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    if (ok) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
  if (out.size() > 80) out.resize(80);
  return out.empty() ? "step" : out;
}

}  // namespace pto
