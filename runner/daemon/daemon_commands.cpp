// The daemon's HostCommands, each handed to its owner (runs: hosting/run_host, leases: hosting/host_leases,
// mutes: store/run_store, bisections: bisect/bisections),
// and what a step's end tells on-call.
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"

namespace pto {

namespace {
// Who made a mute, as it is kept and logged: a token says no name, so the admin is named by where it called from.
std::string who(const Caller& by) { return by.user.empty() ? "admin (" + by.peer + ")" : by.user; }
}  // namespace

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
  runs_->leases().request(std::move(request), by, std::move(reply));
}

Answer Daemon::heartbeat_lease(const std::string& id, const Caller& by) { return runs_->leases().heartbeat(id, by); }

void Daemon::end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) {
  runs_->leases().end(id, why, report, by, std::move(reply));
}

void Daemon::start_bisection(BisectSpec spec, const Caller& by, Reply reply) {
  if (!endpoints_ || stop_.stopping()) return reply(stop_.refusal());
  questions_->start_bisection(std::move(spec), by.peer, std::move(reply));
}

Answer Daemon::cancel_bisection(const std::string& id, const Caller& by) { return questions_->cancel_bisection(id, by.peer); }

Answer Daemon::mute_test(const TestMute& m, const Caller& by) { return store_->mute(m, who(by)); }

Answer Daemon::unmute_test(const std::string& glob, const Caller& by) { return store_->unmute(glob, who(by)); }

void Daemon::step_final(const RunRecord& r, const Plan& p, int job, int step) {
  HostedRun* run = find_run(r.id);
  if (run && run->request().contains("probe")) return;  // a bisection's probe or a control: its own story, not main's
  const std::string ref = run ? run->request().value("ref", "") : "";
  const StepRecord& s = r.jobs[job].steps[step];
  if ((s.state == StepState::Failed || s.state == StepState::TimedOut) && p.jobs[job].steps[step].tests.any() &&
      s.error.rfind("ran no tests", 0) == 0)
    view_.model.metrics.ran_no_tests_by_branch[ref == cfg_.main_ref ? "main" : ref.rfind("refs/pull/", 0) == 0 ? "pull_request" : "other"]++;
  notices_->step_final(r, p, job, step, {ref, run ? run->request().value("sha", "") : "", run ? &run->engine().mask() : nullptr});
}

}  // namespace pto
