// The daemon's lease commands (HostCommands: request, heartbeat, end) and what a lease's end tells the host.
// The book and the desk are lease/; what ties a run's leases to its steps (each attempt's own token, its
// leases bounded by what its timeouts leave, max-cards-per-run) is the run's (hosting/hosted_run).
#include <algorithm>

#include "daemon/daemon.h"
#include "engine/failure_evidence.h"

namespace pto {

void Daemon::lease_ended(const Lease& l) {
  std::optional<FailureEvidence> failed;
  HostedRun* run = find_run(l.request.run_id);
  if (run && !run->engine().finished()) {
    if (const StepRecord::Failure* f = run->lease_ended(l)) failed = f->evidence;
  } else if (l.report.failed() && l.request.run_id.empty()) {
    // An operator's lease is its own "run": its card faults count as another run's for the cards' health.
    failed = classify_failure({l.report.exit_code, l.report.signal, false, false, l.cards}, cfg_.health, l.report.output);
    if (failed->cause == FailureCause::Card || failed->cause == FailureCause::Infra)
      for (int card : failed->cards) host_->broker().charge(card, l.id, failed->pattern.empty() ? failed->reason : failed->pattern);
    model_.metrics.failures_by_cause[to_string(failed->cause)]++;
  }
  const double end = epoch_now(), held = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.granted_at).count();
  for (int card : l.cards) {
    const bool charged = failed && std::count(failed->cards.begin(), failed->cards.end(), card);
    history_->card_event({card, "lease", end - held, end, "lease " + l.id + ": " + l.request.label, l.request.run_id,
                          l.request.step ? l.request.step->text() : "", failed ? "failed" : "ended",
                          failed ? to_string(failed->cause) + (charged ? " (charged to this card)" : "") + ": " + failed->reason : l.end_reason});
  }
}

void Daemon::request_lease(LeaseRequest request, const Caller& by, Reply reply) {
  // Accepted runs may still lease while the daemon drains; nothing else may.
  const std::string& run_id = by.lease_scope();
  HostedRun* run = run_id.empty() ? nullptr : find_run(run_id);
  if (run && run->engine().finished()) run = nullptr;
  if (!server_ || stop_.cancelling() || (stop_.draining() && !run)) return reply(stop_.refusal());
  if (run)
    if (auto refused = run->admit_lease(request, by)) return reply(std::move(*refused));
  lease_desk_->request(std::move(request), run_id, std::move(reply));
}

Answer Daemon::heartbeat_lease(const std::string& id, const Caller& by) { return lease_desk_->heartbeat(id, by.lease_scope()); }

void Daemon::end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) {
  // Its client reads the freed card in the status it asks for next.
  lease_desk_->end(
      id, why, by.lease_scope(),
      [this, reply](Answer a) {
        refresh_view();
        reply(std::move(a));
      },
      report);
}

}  // namespace pto
