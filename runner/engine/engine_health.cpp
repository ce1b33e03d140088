// RunEngine's part in "every red is true" (README): what a failed attempt is charged to and the verdict
// (engine/failure_evidence, the broker's card health), the health check after a card's failure, and the
// preflight before a step. The rest of the state machine is engine/engine.cpp.
#include <algorithm>
#include <fstream>

#include "config/device_spec.h"
#include "engine/engine.h"
#include "exec/process_marker.h"

namespace pto {

namespace {

std::string cards_phrase(const std::vector<int>& cards) {
  if (cards.empty()) return "no card";
  return (cards.size() == 1 ? "card " : "cards ") + join_ids(cards);
}

// The log of the attempt that just ended: what follows the last "pto-runner: attempt N" line, at most 1 MiB.
std::string attempt_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - (1 << 20));
  in.seekg(from);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (auto at = text.rfind("\npto-runner: attempt "); at != std::string::npos) text.erase(0, at + 1);
  return text;
}

}  // namespace

const StepRecord::Failure& RunEngine::record_failure(std::size_t j, std::size_t s, const StepOutcome& o) {
  StepRecord& sr = run_.jobs[j].steps[s];
  AttemptEnd end{o.exit_code, o.signal, o.timed_out, !o.log_error.empty() || !o.survivors.empty(), sr.cards};
  FailureEvidence ev = classify_failure(end, opts_.health, o.timed_out ? std::string() : attempt_log(sr.log_path));
  if (ev.cause == FailureCause::Code && !o.error.empty()) ev.reason = o.error;
  if (ev.cause == FailureCause::Code && !o.limit_reached.empty()) ev.reason = o.limit_reached;
  // A plain failure on a card that has failed other runs' work lately is the card's (across runs: its health).
  if (ev.cause == FailureCause::Code && o.error.empty() && o.limit_reached.empty())
    for (int card : sr.executor_job.empty() ? sr.cards : std::vector<int>{})
      if (std::string elsewhere = broker_.failing_elsewhere(card, run_.id); !elsewhere.empty()) {
        ev.cause = FailureCause::Card;
        ev.cards.push_back(card);
        ev.reason = elsewhere;
      }
  StepRecord::Failure f{sr.attempt, sr.cards, ev, {}};
  if (ev.cause == FailureCause::Card || ev.cause == FailureCause::Infra)
    for (int card : ev.cards)
      if (std::string note = broker_.charge(card, run_.id, ev.pattern.empty() ? ev.reason : ev.pattern); !note.empty())
        f.card_notes.push_back(note);
  sr.failures.push_back(std::move(f));
  return sr.failures.back();
}

void RunEngine::settle_verdict(std::size_t j, std::size_t s, StepState to) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (sr.failures.empty()) return;
  const StepRecord::Failure& last = sr.failures.back();
  std::string notes;
  for (const auto& f : sr.failures)
    for (const auto& n : f.card_notes) notes += (notes.empty() ? "" : "; ") + n;
  if (to == StepState::Succeeded) {
    // Green on a retry is green, and says why it needed one.
    const bool flaky = last.evidence.cause == FailureCause::Code;
    sr.cause = flaky ? "flaky" : to_string(last.evidence.cause);
    sr.verdict = "failed on " + cards_phrase(last.cards) + ", passed on " + cards_phrase(sr.cards) + ": " +
                 (flaky ? "flaky (" + last.evidence.reason + ", then passed on the same commit)" : notes.empty() ? last.evidence.reason : notes);
    return;
  }
  sr.cause = to_string(last.evidence.cause);
  std::string where;  // "on card 3, then on card 5"; nothing for a step without cards
  for (const auto& f : sr.failures)
    if (!f.cards.empty()) where += (where.empty() ? " on " : ", then on ") + cards_phrase(f.cards);
  sr.verdict = "failed" + where + ": " + sr.cause + " (" + last.evidence.reason + ")" + (notes.empty() ? "" : "; " + notes);
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
  l.log_path = opts_.run_dir + "/logs/" + log_name + "-card-" + std::to_string(card) + ".log";
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
  health_checks_[card] = executor_.start(std::move(l), [this, card, cmd, log, began](const StepOutcome& o) {
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
    const std::uint64_t handle = executor_.start(std::move(l), [this, j, s, card, cards, cmd, tally, began](const StepOutcome& o) {
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
  std::ofstream(sr.log_path.empty() ? opts_.run_dir + "/logs/preflight.log" : sr.log_path, std::ios::app)
      << "pto-runner: preflight " << why << " on card(s) " << join_ids(failed) << "; back in the queue for other cards\n";
  broker_.release(cards);
  enqueue(j, s);
  pump();
}

}  // namespace pto
