// The daemon's part in the queue across runs (README "The queue answers"): which pull request a run is of, and
// the older runs of it a new one supersedes. The order itself is the broker's (sched/queue_order); each run's
// priority is handed to it in Daemon::start_run.
#include <algorithm>
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
  for (auto& [other, r] : active_) {
    if (other == id || r->request.value("pull_request", "") != pull_request || r->engine->record().cancelled) continue;
    if (r->engine->record().created > active_.at(id)->engine->record().created) continue;  // never a newer one
    spdlog::info("run {} superseded by run {} (pull request {})", other, id, pull_request);
    r->engine->supersede(id);
    if (auto w = std::find(waiting_for_user_.begin(), waiting_for_user_.end(), other); w != waiting_for_user_.end()) {
      waiting_for_user_.erase(w);
      r->engine->start();  // everything is cancelled already: it ends at once
    }
    leases_->end_run(other, "its run was superseded by run " + id);
  }
}

}  // namespace pto
