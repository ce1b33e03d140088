#include "config/project.h"

#include <algorithm>
#include <filesystem>

#include "config/device_spec.h"
#include "config/env_file.h"
#include "config/job_graph.h"
#include "config/yaml_map.h"

namespace fs = std::filesystem;

namespace pto {

const JobDef* Project::find_job(const std::string& name) const {
  for (const auto& j : jobs)
    if (j.name == name) return &j;
  return nullptr;
}

std::string resolve_under_root(const std::string& root, const std::string& path) {
  if (path.empty()) return path;
  std::string p = expand_home(path);
  return fs::path(p).is_absolute() ? p : fs::absolute(fs::path(root) / p).lexically_normal().string();
}

void resolve_host_dirs(RunnerConfig& cfg, const std::string& root, const std::string& lock_dir_flag,
                       const std::string& state_dir_flag) {
  cfg.lock_dir = resolve_under_root(root, lock_dir_flag.empty() ? cfg.lock_dir : lock_dir_flag);
  cfg.state_dir = resolve_under_root(root, state_dir_flag.empty() ? cfg.state_dir : state_dir_flag);
  // A source repository or mirror given as a path is taken from --root too; URLs stay as they are.
  auto is_url = [](const std::string& r) { return r.find("://") != std::string::npos || r.find('@') != std::string::npos; };
  if (!cfg.source.repo.empty() && !is_url(cfg.source.repo)) cfg.source.repo = resolve_under_root(root, cfg.source.repo);
  if (!cfg.source.mirror.empty()) cfg.source.mirror = resolve_under_root(root, cfg.source.mirror);
  for (NotifyReceiver& r : cfg.notify.receivers)
    if (!r.secret_file.empty()) r.secret_file = resolve_under_root(root, r.secret_file);
  cfg.caches.dir = cfg.caches.dir.empty() ? cfg.state_dir + "/caches" : resolve_under_root(root, cfg.caches.dir);
  if (!cfg.caches.remote_credential_file.empty()) cfg.caches.remote_credential_file = resolve_under_root(root, cfg.caches.remote_credential_file);
}

std::string apply_device_overrides(RunnerConfig& cfg, const std::string& devices, const std::string& groups) {
  std::string err;
  if (!devices.empty()) {
    std::map<int, std::string> types;
    auto ids = parse_typed_devices(devices, types, err);
    if (!ids) return "--devices: " + err;
    cfg.device_ids = *ids;
    if (!types.empty()) {  // typed on the command line: these types, not runner.yml's
      cfg.device_type_all.clear();
      cfg.device_types = types;
    } else {
      for (auto it = cfg.device_types.begin(); it != cfg.device_types.end();)  // types of cards this run lacks
        it = std::count(ids->begin(), ids->end(), it->first) ? std::next(it) : cfg.device_types.erase(it);
    }
    if (groups.empty() && !check_device_groups(cfg.device_ids, cfg.device_groups).empty())
      cfg.device_groups.clear();  // runner.yml's groups name cards this run does not have
  }
  if (!groups.empty()) {
    auto g = parse_device_groups(groups, err);
    if (!g) return "--device-groups: " + err;
    cfg.device_groups = *g;
  }
  std::string problem = check_device_groups(cfg.device_ids, cfg.device_groups);
  return problem.empty() ? "" : "--device-groups: " + problem;
}

static std::vector<fs::path> yaml_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    auto ext = e.path().extension();
    if ((ext == ".yml" || ext == ".yaml") && e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

RunnerConfig load_host_config(const LoadOptions& opts, Diagnostics& diags, bool* default_host) {
  const fs::path root(opts.root);
  RunnerConfig cfg;
  std::string cfg_path = opts.config_file;
  if (cfg_path.empty() && fs::exists(root / "runner.yml")) cfg_path = (root / "runner.yml").string();
  if (!cfg_path.empty()) {
    std::string display = opts.config_file.empty() ? "runner.yml" : opts.config_file;
    cfg = load_runner_config(cfg_path, display, diags);
  }
  if (!cfg.env_file.empty())  // the host's .env under runner.yml's env (which wins)
    for (auto& [k, v] : load_env_file(resolve_under_root(opts.root, cfg.env_file), cfg.env_file, diags)) cfg.env.emplace(k, v);
  std::string problem = apply_device_overrides(cfg, opts.devices_override, opts.device_groups_override);
  if (!problem.empty()) diags.error("(command line)", 0, 0, "bad-value", problem);
  if (default_host) *default_host = cfg_path.empty() && opts.devices_override.empty();
  return cfg;
}

Project load_project(const LoadOptions& opts, Diagnostics& diags) {
  Project p;
  p.root = opts.root;
  const fs::path root(opts.root);
  if (!fs::is_directory(root)) {
    diags.error(opts.root, 0, 0, "unreadable", "--root is not a directory");
    return p;
  }
  p.versions = load_versions_env((root / "toolchain/versions.env").string(), "toolchain/versions.env", diags);
  if (fs::exists(root / "toolchain/ptoas.yml"))
    p.toolchain = load_toolchain_config((root / "toolchain/ptoas.yml").string(), "toolchain/ptoas.yml", diags);
  else
    p.toolchain.file = "(built-in defaults)";

  if (opts.host) {
    p.runner = *opts.host;
  } else {
    p.runner = load_host_config(opts, diags, &p.default_host);
  }

  for (const auto& f : yaml_files(root / "ci" / "hosts"))
    p.host_profiles.push_back({"ci/hosts/" + f.filename().string(),
                               load_runner_config(f.string(), "ci/hosts/" + f.filename().string(), diags)});
  for (const auto& f : yaml_files(root / "models")) {
    std::string id = f.stem().string();
    p.models.emplace(id, load_model_file(f.string(), "models/" + f.filename().string(), id, diags));
  }
  for (const auto& f : yaml_files(root / "jobs"))
    p.jobs.push_back(load_job_file(f.string(), "jobs/" + f.filename().string(), f.stem().string(), diags));
  if (p.jobs.empty()) diags.error("jobs/", 0, 0, "unreadable", "no job files (jobs/*.yml) under " + opts.root);

  // Cross-file checks.
  std::map<std::string, const JobDef*> by_name;
  std::vector<std::string> names;
  for (const auto& j : p.jobs) {
    auto [it, fresh] = by_name.emplace(j.name, &j);
    if (!fresh)
      diags.error(j.file, j.name_loc.line, j.name_loc.col, "duplicate-key",
                  "job name '" + j.name + "' is also used by " + it->second->file);
    names.push_back(j.name);
  }
  std::vector<std::string> model_ids;
  for (const auto& [id, _] : p.models) model_ids.push_back(id);

  std::map<std::string, std::vector<std::string>> graph;
  for (const auto& j : p.jobs) {
    auto& deps = graph[j.name];
    for (std::size_t i = 0; i < j.needs.size(); ++i) {
      const auto& need = j.needs[i];
      SourceLoc l = i < j.needs_locs.size() ? j.needs_locs[i] : j.loc;
      if (need == "toolchain") {
        diags.error(j.file, l.line, l.col, "unknown-need",
                    "needs: 'toolchain' is the lead job; declare `toolchain: ptoas` instead of needing it");
      } else if (!by_name.count(need)) {
        std::string near = nearest_word(need, names);
        diags.error(j.file, l.line, l.col, "unknown-need",
                    "needs: no job named '" + need + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"));
      } else if (need == j.name) {
        diags.error(j.file, l.line, l.col, "cycle", "job '" + j.name + "' needs itself");
      } else {
        deps.push_back(need);
      }
    }
    for (const auto& s : j.steps)
      for (std::size_t i = 0; i < s.models.size(); ++i)
        if (!p.models.count(s.models[i])) {
          SourceLoc l = i < s.model_locs.size() ? s.model_locs[i] : s.loc;
          std::string near = nearest_word(s.models[i], model_ids);
          diags.error(j.file, l.line, l.col, "unknown-model",
                      "models: no file models/" + s.models[i] + ".yml" +
                          (near.empty() ? "" : "; did you mean '" + near + "'?"));
        }
  }
  JobGraphResult order = order_jobs(graph);
  if (!order.cycle.empty()) {
    std::string text;
    for (const auto& n : order.cycle) text += (text.empty() ? "" : " -> ") + n;
    const JobDef* first = by_name[order.cycle.front()];
    // Point at the `needs` entry that closes the cycle in the first job.
    SourceLoc l = first->loc;
    for (std::size_t i = 0; i < first->needs.size(); ++i)
      if (first->needs[i] == order.cycle[1] && i < first->needs_locs.size()) l = first->needs_locs[i];
    diags.error(first->file, l.line, l.col, "cycle", "jobs form a cycle: " + text);
  }
  return p;
}

StartFindings split_start_findings(const Diagnostics& diags, const Project& project, const std::string& root) {
  StartFindings out;
  for (const auto& d : diags.items()) {
    if (d.severity != Severity::Error) continue;
    const bool host = d.file == project.runner.file || d.file == "(command line)" || d.file == root ||
                      (!project.runner.env_file.empty() && d.file == project.runner.env_file);
    (host ? out.host : out.definitions) += "\n" + format_diagnostic(d);
  }
  return out;
}

}  // namespace pto
