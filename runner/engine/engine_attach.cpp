// RunEngine's part in attached runs (`submit --attach`, one pto-runner run per workflow run, SPEC "The
// switch-over"): the run is planned with every job of its commit, and only the jobs its clients asked for
// (and what they need) start; the others are held. A later client of the same workflow run wants more jobs;
// an interrupted client's own jobs are cancelled; when no client is left the held jobs are skipped and the
// run ends. The daemon keeps the clients (hosting/attached_runs); this file keeps the jobs.
#include <algorithm>

#include "engine/engine.h"

namespace pto {

std::set<std::string> RunEngine::with_needs(const std::vector<std::string>& names) const {
  std::set<std::string> out;
  std::vector<std::string> pending(names.begin(), names.end());
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    if (!out.insert(name).second) continue;
    for (const auto& j : plan_.jobs)
      if (j.name == name)
        for (const auto& n : j.needs) pending.push_back(n);
  }
  return out;
}

std::string RunEngine::unknown_job(const std::vector<std::string>& names) const {
  for (const auto& n : names)
    if (std::none_of(plan_.jobs.begin(), plan_.jobs.end(), [&](const PlanJob& j) { return j.name == n; })) return n;
  return "";
}

void RunEngine::hold_all_but(const std::vector<std::string>& names) {
  wanted_ = with_needs(names);
  // The lead job goes with any job that needs the toolchain: it is what makes their PTOAS.
  for (const auto& j : plan_.jobs)
    if (j.lead && std::any_of(plan_.jobs.begin(), plan_.jobs.end(), [&](const PlanJob& o) { return o.toolchain && wanted_->count(o.name); }))
      wanted_->insert(j.name);
}

void RunEngine::want(const std::vector<std::string>& names) {
  if (!wanted_) return;
  std::vector<std::string> all(wanted_->begin(), wanted_->end());
  all.insert(all.end(), names.begin(), names.end());
  hold_all_but(all);
  pump();
}

void RunEngine::unwant(const std::set<std::string>& names, const std::string& reason) {
  if (!wanted_) return;
  for (const auto& n : names) wanted_->erase(n);
  for (std::size_t j = 0; j < plan_.jobs.size(); ++j) {
    if (!names.count(plan_.jobs[j].name)) continue;
    if (run_.jobs[j].state == JobState::Pending) skip_job(j, JobState::Cancelled, reason);
    else if (run_.jobs[j].state == JobState::Running) cancel_job(j, reason);
  }
  pump();
}

void RunEngine::release_held(const std::string& reason) {
  if (!wanted_) return;
  for (std::size_t j = 0; j < plan_.jobs.size(); ++j)
    if (!wanted_->count(plan_.jobs[j].name) && run_.jobs[j].state == JobState::Pending) skip_job(j, JobState::Skipped, reason);
  pump();
}

bool RunEngine::held(std::size_t j) const { return wanted_ && !wanted_->count(plan_.jobs[j].name); }

}  // namespace pto
