#include "reuse/result_key.h"

#include <nlohmann/json.hpp>

#include "exec/run_sync.h"
#include "util/process_env.h"
#include "util/sha256.h"

namespace pto {

namespace {
bool names_the_run(const std::string& var) {
  for (const char* prefix : {"PTO_RUNNER_", "GITHUB_", "RUNNER_"})
    if (var.rfind(prefix, 0) == 0) return true;
  return false;
}
}  // namespace

std::string result_key(const ResultKeyParts& p) {
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : p.host_env)
    if (!names_the_run(k)) env[k] = sha256_hex(v);  // a secret's value is in the key only as its digest
  const nlohmann::json j = {{"step", p.step_key},       {"inputs", p.inputs_tree}, {"job_env", p.job_env},
                            {"needs", p.needs_outputs}, {"toolchain", p.toolchain}, {"env", env},
                            {"card_type", p.card_type}, {"v", 1}};
  return sha256_hex(j.dump());
}

std::string globs_text(const std::vector<std::string>& globs) {
  std::string s;
  for (const std::string& g : globs) s += g + "\n";
  return s;
}

std::string inputs_tree(const std::string& worktree, const std::vector<std::string>& globs, std::string& error) {
  // root reads a worktree its run's user may own: git's ownership check would refuse it.
  std::vector<std::string> argv = {"git", "-c", "safe.directory=*", "-C", worktree};
  if (globs.empty()) argv.insert(argv.end(), {"rev-parse", "HEAD^{tree}"});
  else {
    // The checkout's index is its commit's tree (read before any step ran); ls-files takes glob pathspecs.
    argv.insert(argv.end(), {"ls-files", "--stage", "--full-name", "--"});
    for (const std::string& g : globs) argv.push_back(g[0] == '!' ? ":(exclude,glob)" + g.substr(1) : ":(glob)" + g);
  }
  SyncResult r = run_sync(argv, environment_list(), 60, "/dev/null");
  if (!r.outcome.ok()) {
    error = "git " + argv[5] + " in " + worktree + " failed: " + r.output.substr(0, 200);
    return "";
  }
  return globs.empty() ? r.output.substr(0, r.output.find_first_of("\r\n")) : sha256_hex(r.output);
}

}  // namespace pto
