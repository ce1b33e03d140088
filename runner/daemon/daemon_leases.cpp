// The daemon's lease commands (HostCommands: request, heartbeat, end) and what ties a run's leases to its
// steps: each attempt's own lease token, its leases revoked when it stops running and bounded by what its
// timeouts leave, max-cards-per-run. The book and the desk are lease/; this file decides for the daemon.
#include <algorithm>
#include <cstdio>

#include "engine/failure_evidence.h"

#include "daemon/daemon.h"

namespace pto {

std::string Daemon::step_key_of(std::size_t job, std::size_t step) { return std::to_string(job + 1) + "-" + std::to_string(step + 1); }

void Daemon::step_stopped(const std::string& run, int job, int step) {
  auto it = active_.find(run);
  if (it == active_.end()) return;
  const std::string key = step_key_of(static_cast<std::size_t>(job), static_cast<std::size_t>(step));
  auto t = it->second->step_tokens.find(key);
  if (t == it->second->step_tokens.end()) return;
  access_.forget_token(t->second.token);
  it->second->step_tokens.erase(t);
  leases_->end_step(run, key, "the step that asked for it ended");
}

void Daemon::lease_ended(const Lease& l) {
  std::optional<FailureEvidence> failed;
  std::size_t job = 0, step = 0;
  auto run = active_.find(l.request.run_id);
  if (l.report.given && run != active_.end() && std::sscanf(l.request.step.c_str(), "%zu-%zu", &job, &step) == 2 && job && step) {
    // Passed or not: a passing batch's markers are what shows another card's failed cases to be that card's.
    const auto* f = run->second->engine->lease_ended(job - 1, step - 1, l.id, l.cards, l.report.exit_code, l.report.signal, l.report.output);
    if (f) failed = f->evidence;
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
    history_->card_event({card, "lease", end - held, end, "lease " + l.id + ": " + l.request.label, l.request.run_id, l.request.step,
                          failed ? "failed" : "ended",
                          failed ? to_string(failed->cause) + (charged ? " (charged to this card)" : "") + ": " + failed->reason : l.end_reason});
  }
}

void Daemon::request_lease(LeaseRequest request, const Caller& by, Reply reply) {
  // Accepted runs may still lease while the daemon drains; nothing else may.
  const std::string& run = by.lease_scope();
  if (!server_ || cancelling_ || (draining_ && (run.empty() || !active_.count(run)))) return reply(stopping_refusal());
  if (auto it = active_.find(run); it != active_.end()) {
    // A run's leases: at most max-cards-per-run cards at once, and none past its step.
    const int asked = request.device_ids.empty() ? request.devices : static_cast<int>(request.device_ids.size());
    if (cfg_.max_cards_per_run > 0 && leases_->cards_of_run(run) + asked > cfg_.max_cards_per_run)
      return reply(Answer::error(Outcome::Conflict, "max-cards-per-run is " + std::to_string(cfg_.max_cards_per_run) + ": run " + run +
                                                        " holds or waits for " + std::to_string(leases_->cards_of_run(run)) +
                                                        " card(s) by lease and asks for " + std::to_string(asked) + " more"));
    if (!by.step.empty()) {
      request.step = by.step;
      // A step retried elsewhere: its harness's leases keep off the cards its failure was charged to.
      std::size_t job = 0, step = 0;
      if (std::sscanf(by.step.c_str(), "%zu-%zu", &job, &step) == 2 && job && step) request.avoid = it->second->engine->avoided_by(job - 1, step - 1);
      auto t = it->second->step_tokens.find(by.step);
      if (t != it->second->step_tokens.end() && t->second.deadline > 0) {
        const double left = std::max(1.0, t->second.deadline - host_->clock->now());
        if (request.max_seconds <= 0 || request.max_seconds > left) request.max_seconds = left;
      }
    }
  }
  lease_desk_->request(std::move(request), run, std::move(reply));
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
