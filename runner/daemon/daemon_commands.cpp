// The daemon's HostCommands, each handed to its owner (runs: hosting/run_host, leases: hosting/host_leases,
// bisections: bisect/bisections),
// and what a step's end tells on-call.
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"

namespace pto {

void Daemon::submit_run(RunSubmission submission, const Caller& by, Reply reply) {
  if (!endpoints_) return reply(stop_.refusal());
  runs_->submit(std::move(submission), by.peer, std::move(reply));
}

Answer Daemon::cancel_run(const std::string& id, const Caller& by) { return runs_->cancel(id, by.peer); }

Answer Daemon::detach_client(const std::string& run, const std::string& client, bool cancel, const Caller&) {
  Answer a = runs_->detach(run, client, cancel);
  if (a.outcome == Outcome::Ok) refresh_view();
  return a;
}

void Daemon::request_lease(LeaseRequest request, const Caller& by, Reply reply) {
  if (!endpoints_) return reply(stop_.refusal());
  leases_->request(std::move(request), by, std::move(reply));
}

Answer Daemon::heartbeat_lease(const std::string& id, const Caller& by) { return leases_->heartbeat(id, by); }

void Daemon::end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) {
  leases_->end(id, why, report, by, std::move(reply));
}

void Daemon::start_bisection(BisectSpec spec, const Caller& by, Reply reply) {
  if (!endpoints_ || stop_.stopping()) return reply(stop_.refusal());
  bisections_->start(std::move(spec), by.peer, std::move(reply));
}

Answer Daemon::cancel_bisection(const std::string& id, const Caller& by) { return bisections_->cancel(id, by.peer); }

void Daemon::step_final(const RunRecord& r, const Plan& p, int job, int step) {
  HostedRun* run = find_run(r.id);
  if (run && run->request().contains("probe")) return;  // a bisection's probe or a control: its own story, not main's
  const std::string ref = run ? run->request().value("ref", "") : "";
  const StepRecord& s = r.jobs[job].steps[step];
  if ((s.state == StepState::Failed || s.state == StepState::TimedOut) && p.jobs[job].steps[step].tests.any() &&
      s.error.rfind("ran no tests", 0) == 0)
    model_.metrics.ran_no_tests_by_branch[ref == cfg_.main_ref ? "main" : ref.rfind("refs/pull/", 0) == 0 ? "pull_request" : "other"]++;
  notices_->step_final(r, p, job, step, {ref, run ? run->request().value("sha", "") : "", run ? &run->engine().mask() : nullptr});
}

}  // namespace pto
