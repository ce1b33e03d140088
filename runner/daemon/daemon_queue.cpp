// The daemon's part in the queue across runs (docs/on-call.md, "The queue"): which pull request a run is of, and
// the older runs of it a new one supersedes. The order itself is the broker's (sched/queue_order); each run's
// priority is handed to it in Daemon::start_run.
#include <regex>

#include <spdlog/spdlog.h>

#include "daemon/daemon.h"

namespace pto {

std::string Daemon::pull_request_of(const RunSubmission& s) {
  // refs/pull/N/merge or refs/pull/N/head (what a pull request's workflow run checks out), else the head
  // branch GitHub names ($GITHUB_HEAD_REF); a push to a branch, the main branch among them, is no pull request.
  static const std::regex pr_ref("refs/pull/([0-9]+)/(merge|head)");
  std::smatch m;
  const std::string repo = s.github.is_object() ? s.github.value("repository", "") : "";
  if (std::regex_match(s.ref, m, pr_ref)) return repo + "#" + m[1].str();
  if (s.github.is_object() && s.github.contains("head_ref")) return repo + ":" + s.github["head_ref"].get<std::string>();
  return "";
}

void Daemon::supersede_older(const std::string& id, const std::string& pull_request) {
  const std::string created = runs_.at(id)->engine().record().created;
  for (auto& [other, r] : runs_) {
    const RunRecord& rec = r->engine().record();
    if (other == id || r->request().value("pull_request", "") != pull_request || rec.cancelled || r->engine().finished()) continue;
    if (rec.created > created) continue;  // never a newer one
    spdlog::info("run {} superseded by run {} (pull request {})", other, id, pull_request);
    r->supersede(id);
  }
}

}  // namespace pto
