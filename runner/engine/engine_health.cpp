// RunEngine's part in "every red is true" (docs/on-call.md): what a failed attempt is charged to and the verdict
// (engine/failure_evidence, the broker's card health), the health check after a card's failure, and the
// preflight before a step. The rest of the state machine is engine/engine.cpp.
#include <algorithm>
#include <fstream>
#include <optional>
#include <string_view>

#include "config/device_spec.h"
#include "engine/attempt_facts.h"
#include "engine/engine.h"
#include "exec/process_marker.h"
#include "util/state_paths.h"

namespace pto {

void RunEngine::blame_failing_cards(FailureEvidence& ev, const std::vector<int>& cards) {
  if (ev.cause != FailureCause::Code) return;
  for (int card : cards)
    if (std::string elsewhere = broker_.failing_elsewhere(card, run_.id); !elsewhere.empty()) {
      ev.cause = FailureCause::Card;
      ev.cards.push_back(card);
      ev.reason = elsewhere;
    }
}

std::vector<std::string> RunEngine::charge_cards(StepRecord& sr, const FailureEvidence& ev) {
  std::vector<std::string> notes;
  if (ev.cause != FailureCause::Card && ev.cause != FailureCause::Infra) return notes;
  for (int card : ev.cards) {
    if (std::count(sr.charged.begin(), sr.charged.end(), card)) continue;
    sr.charged.push_back(card);
    if (std::string note = broker_.charge(card, run_.id, ev.pattern.empty() ? ev.reason : ev.pattern); !note.empty()) notes.push_back(note);
  }
  return notes;
}

const StepRecord::Failure& RunEngine::record_failure(std::size_t j, std::size_t s, const StepOutcome& o) {
  StepRecord& sr = run_.jobs[j].steps[s];
  AttemptEnd end{o.exit_code, o.signal, o.timed_out, !o.log_error.empty() || !o.survivors.empty(), sr.cards};
  // Its own log and its leases' markers together: a harness that kept its batches' output to itself still
  // shows which cards its failed cases ran on.
  std::string log = o.timed_out ? std::string() : attempt_log(sr.log_path);
  if (!o.timed_out && !sr.lease_markers.empty()) log += "\n" + sr.lease_markers;
  FailureEvidence ev = classify_failure(end, opts_.health, log);
  if (ev.cause == FailureCause::Code && !o.error.empty()) ev.reason = o.error;
  if (ev.cause == FailureCause::Code && !o.limit_reached.empty()) ev.reason = o.limit_reached;
  if (o.error.empty() && o.limit_reached.empty()) {
    // A lease of this attempt that failed by its cards' doing: the step failed by theirs.
    if (ev.cause == FailureCause::Code)
      for (const auto& lf : sr.lease_failures)
        if (lf.attempt == sr.attempt && (lf.evidence.cause == FailureCause::Card || lf.evidence.cause == FailureCause::Infra)) {
          if (ev.cause == FailureCause::Code) ev = lf.evidence, ev.cards.clear();
          for (int c : lf.evidence.cards)
            if (!std::count(ev.cards.begin(), ev.cards.end(), c)) ev.cards.push_back(c);
        }
    // Across runs: a card that has failed other runs' work lately (its health). Not a Slurm step's cards.
    if (sr.executor_job.empty()) blame_failing_cards(ev, attempt_cards(sr));
  }
  StepRecord::Failure f{sr.attempt, attempt_cards(sr), ev, charge_cards(sr, ev), ""};
  sr.failures.push_back(std::move(f));
  return sr.failures.back();
}

const StepRecord::Failure* RunEngine::lease_ended(std::size_t j, std::size_t s, const std::string& lease, const std::vector<int>& cards,
                                                  int exit_code, int signal, const std::string& output, const std::string& test) {
  if (j >= run_.jobs.size() || s >= run_.jobs[j].steps.size()) return nullptr;
  StepRecord& sr = run_.jobs[j].steps[s];
  if (sr.state != StepState::Running) return nullptr;  // a late release of an attempt that is over
  for (int c : cards)
    if (!std::count(sr.leased.begin(), sr.leased.end(), c)) sr.leased.push_back(c);
  if (!test.empty() && sr.test_leases.size() < 100000) {
    std::vector<int>& mine = sr.test_leases[test];
    for (int c : cards)
      if (!std::count(mine.begin(), mine.end(), c)) mine.push_back(c);
  }
  // Its markers join the attempt's (bounded as a log tail is): the cases on the other cards decide whether
  // failed cases are a card's or the commit's.
  std::string markers;
  const std::string_view text(output);
  for (std::size_t at = 0; at < text.size();) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(at, nl - at);
    if (line.find("PYPTO_EXEC_RESULT=") != std::string_view::npos) markers.append(line).push_back('\n');
    at = nl + 1;
  }
  const bool failed = exit_code != 0 || signal != 0 || markers.find("PYPTO_EXEC_RESULT=FAIL") != std::string::npos ||
                      markers.find("PYPTO_EXEC_RESULT=INFRA") != std::string::npos;
  std::optional<FailureEvidence> classified;
  // Read with the earlier leases' markers, before its own join them.
  if (failed) classified = classify_failure({exit_code, signal, false, false, cards}, opts_.health, output + "\n" + sr.lease_markers);
  if (sr.lease_markers.size() + markers.size() <= (4u << 20)) sr.lease_markers += markers;
  if (!classified) return nullptr;
  FailureEvidence& ev = *classified;
  // Charged to its own cards only: an earlier lease's failed cases were that lease's to charge.
  if (ev.cause == FailureCause::Card || ev.cause == FailureCause::Infra) {
    std::vector<int> own;
    for (int c : ev.cards)
      if (std::count(cards.begin(), cards.end(), c)) own.push_back(c);
    ev.cards = own.empty() ? cards : own;
  }
  blame_failing_cards(ev, cards);
  if (!test.empty() && (ev.cause == FailureCause::Card || ev.cause == FailureCause::Infra) && sr.test_lease_faults.size() < 100000)
    sr.test_lease_faults[test] = ev.matched_line.empty() ? ev.reason : ev.matched_line;
  sr.lease_failures.push_back({sr.attempt, cards, ev, charge_cards(sr, ev), lease});
  if (observer_) observer_->on_attempt_failed(run_, plan_, static_cast<int>(j), static_cast<int>(s), sr.lease_failures.back(), false);
  return &sr.lease_failures.back();
}

std::vector<int> RunEngine::avoided_by(std::size_t j, std::size_t s) const {
  if (j >= run_.jobs.size() || s >= run_.jobs[j].steps.size()) return {};
  return run_.jobs[j].steps[s].avoid;
}

void RunEngine::settle_verdict(std::size_t j, std::size_t s, StepState to) {
  StepRecord& sr = run_.jobs[j].steps[s];
  std::string notes;
  for (const auto* list : {&sr.failures, &sr.lease_failures})
    for (const auto& f : *list)
      for (const auto& n : f.card_notes) notes += (notes.empty() ? "" : "; ") + n;
  if (sr.failures.empty()) {
    // Green, but a lease its harness took failed (the harness retried the batch, or did not mind): said, so
    // the card's part is seen; the step has no cause of its own.
    if (sr.lease_failures.empty() || to != StepState::Succeeded) return;
    const StepRecord::Failure& lf = sr.lease_failures.back();
    sr.verdict = "passed; lease " + lf.lease + " failed on " + cards_phrase(lf.cards) + ": " + to_string(lf.evidence.cause) + " (" +
                 lf.evidence.reason + ")" + (notes.empty() ? "" : "; " + notes);
    return;
  }
  const StepRecord::Failure& last = sr.failures.back();
  if (to == StepState::Succeeded) {
    // Green on a retry is green, and says why it needed one.
    const bool flaky = last.evidence.cause == FailureCause::Code;
    sr.cause = flaky ? "flaky" : to_string(last.evidence.cause);
    sr.verdict = "failed on " + cards_phrase(last.cards) + ", passed on " + cards_phrase(attempt_cards(sr)) + ": " +
                 (flaky ? "flaky (" + last.evidence.reason + ", then passed on the same commit)" : notes.empty() ? last.evidence.reason : notes);
    return;
  }
  sr.cause = to_string(last.evidence.cause);
  std::string where;  // "on card 3, then on card 5"; nothing for a step without cards
  for (const auto& f : sr.failures)
    if (!f.cards.empty()) where += (where.empty() ? " on " : ", then on ") + cards_phrase(f.cards);
  sr.verdict = "failed" + where + ": " + sr.cause + " (" + last.evidence.reason + ")" + (notes.empty() ? "" : "; " + notes);
}

void RunEngine::give_back_host(StepRecord& sr) {
  if (!sr.held) return;
  broker_.release_hold(sr.held);
  sr.held = 0;
}

void RunEngine::release_cards(const std::vector<int>& cards, bool infra, const std::string& what) {
  if (cards.empty()) return;
  trace("release", cards);
  broker_.report_outcome(cards, infra, what);
  std::vector<int> now;
  for (int card : cards) {
    // A card that just saw an infrastructure failure is checked before anyone else gets it; it stays locked
    // meanwhile. The check is a supervised process like a step, so the engine (and the daemon) keep going.
    if (infra && !opts_.health.check.empty() && !opts_.simulate && !broker_.is_drained(card))
      start_health_check(card, what);
    else
      now.push_back(card);
  }
  if (!now.empty()) broker_.release(now);
}

StepLaunch RunEngine::card_check(int card, const std::string& command, std::string what, const std::string& log_name) {
  StepLaunch l;
  l.label = std::move(what);
  l.command = command;
  l.shell = "sh";
  l.working_directory = opts_.run_as ? "/" : opts_.root;  // root's command: never in a tree a run's user wrote
  for (const auto& [k, v] : opts_.base_env) l.env.push_back(k + "=" + v);
  l.env.push_back("TASK_DEVICE=" + std::to_string(card));
  l.env.push_back("DEVICE_ID=" + std::to_string(card));
  l.env.push_back("PTO_RUNNER_RUN_ID=" + run_.id);
  l.log_path = run_logs(opts_.run_dir) + "/" + log_name + "-card-" + std::to_string(card) + ".log";
  l.marker = ProcessMarker::for_health_check(run_.id, card, ++health_check_count_).text();
  l.timeout_seconds = opts_.health.check_timeout_seconds;
  l.grace_seconds = opts_.kill_grace_seconds;
  return l;
}

void RunEngine::start_health_check(int card, const std::string& after) {
  const std::string cmd = for_card(opts_.health.check, card);
  broker_.relabel(card, "health check after " + after);
  StepLaunch l = card_check(card, cmd, "health check of card " + std::to_string(card), "health");
  const std::string log = l.log_path;
  const double began = now();
  health_checks_[card] = start_processes(executor_, std::move(l), [this, card, cmd, log, began](const StepOutcome& o) {
    health_checks_.erase(card);
    const std::string how = o.failure();
    if (!o.ok() && !o.cancelled)
      broker_.report_outcome({card}, true, "health check `" + cmd + "` failed (" + how + "; " + log + ")");
    if (observer_ && !o.cancelled) observer_->on_health_check(run_, card, cmd, now() - began, how);
    broker_.release({card});
    pump();  // the run may be waiting only for this
  });
}

void RunEngine::start_preflight(std::size_t j, std::size_t s, const std::vector<int>& cards) {
  StepRecord& sr = run_.jobs[j].steps[s];
  sr.wait_reason = "preflight on " + std::string(cards.size() == 1 ? "card " : "cards ") + join_ids(cards);
  struct Tally {
    std::size_t left;
    std::vector<int> failed;
    std::string why;
  };
  auto tally = std::make_shared<Tally>(Tally{cards.size(), {}, ""});
  for (int card : cards) {
    const std::string cmd = for_card(opts_.health.preflight, card);
    StepLaunch l = card_check(card, cmd, "preflight of card " + std::to_string(card) + " for " + label(j, s), "preflight");
    const double began = now();
    const std::uint64_t handle = start_processes(executor_, std::move(l), [this, j, s, card, cards, cmd, tally, began](const StepOutcome& o) {
      const std::string how = o.failure();
      if (!o.ok() && !o.cancelled) tally->failed.push_back(card), tally->why = "`" + cmd + "` " + how;
      if (observer_ && !o.cancelled) observer_->on_health_check(run_, card, cmd, now() - began, how);
      if (--tally->left > 0) return;
      preflights_.erase({j, s});
      finish_preflight(j, s, cards, tally->failed, tally->why);
    });
    if (tally->left > 0) preflights_[{j, s}].push_back(handle);  // not when its end came before start() returned
  }
}

void RunEngine::finish_preflight(std::size_t j, std::size_t s, const std::vector<int>& cards, const std::vector<int>& failed,
                                 const std::string& why) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (run_.jobs[j].cancelled || run_.cancelled) {
    give_back_host(sr);
    broker_.release(cards);
    transition(j, s, StepState::Cancelled);
    pump();
    return;
  }
  if (failed.empty()) return launch(j, s, cards, true);
  // Uncharged for the step: back in its place in the queue, for other cards; the card carries it.
  for (int card : failed) {
    broker_.charge(card, run_.id, "preflight " + why);
    if (!std::count(sr.avoid.begin(), sr.avoid.end(), card)) sr.avoid.push_back(card);
  }
  std::ofstream(sr.log_path.empty() ? run_logs(opts_.run_dir) + "/preflight.log" : sr.log_path, std::ios::app)
      << "pto-runner: preflight " << why << " on card(s) " << join_ids(failed) << "; back in the queue for other cards\n";
  give_back_host(sr);
  broker_.release(cards);
  enqueue(j, s);
  pump();
}

}  // namespace pto
