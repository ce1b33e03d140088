// The daemon's bisections (SPEC "Find the commit"; docs/maintainers.md, "Find the commit"): what the policy
// (bisect/bisection) wants probed becomes runs of those commits, made here like any submission (their own
// worktree, definitions and toolchain pin, the sandbox, card retries), trimmed to the probed step and what it
// needs (plan/probe_plan) and queued below everything else (kProbePriority). When a probe's run ends its
// verdict (bisect/probe_verdict) goes back to the policy; a run the policy no longer needs is cancelled. Every
// change is kept in the journal's file (store/bisection_journal), so a bisection goes on after a restart: the
// probes that were running are lost with their runs and run again.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include "bisect/probe_verdict.h"
#include "daemon/daemon.h"
#include "notify/notifier.h"
#include "read_model/card_history.h"
#include "store/bisection_journal.h"
#include "util/api_paths.h"
#include "util/ids.h"
#include "util/state_paths.h"

namespace pto {

namespace {

/// Below every ref's priority (runner.yml priorities go from -1000): a probe never runs ahead of a pull
/// request or the main branch.
constexpr int kProbePriority = -1001;

}  // namespace

Caller Daemon::own_caller(const std::string& what) {
  Caller c;
  c.role = Caller::Role::Admin;
  c.peer = what;
  return c;
}

void Daemon::open_bisections() {
  std::string error;
  bisection_journal_ = BisectionJournal::open(journal_file(state_dir_), error);
  if (!bisection_journal_) {
    spdlog::error("bisections are off: {}", error);
    return;
  }
  for (const nlohmann::json& rec : bisection_journal_->load(200)) {
    if (!rec.contains("bisection")) continue;
    auto b = std::make_unique<Bisection>(Bisection::from_json(rec["bisection"]));
    if (b->id().empty() || bisections_.count(b->id())) continue;
    const std::string id = b->id();
    if (!b->done()) {
      b->restarted();
      spdlog::info("bisection {} goes on after the restart", id);
    }
    bisections_[id] = {std::move(b), rec.value("created", ""), rec.value("finished", ""), {}};
  }
  model_.bisections.clear();
  std::vector<std::pair<std::string, std::string>> order;  // created, id
  for (const auto& [id, e] : bisections_) order.push_back({e.created, id});
  std::sort(order.rbegin(), order.rend());
  for (const auto& [created, id] : order) {
    nlohmann::json j = bisections_[id].b->json();
    j["created"] = created;
    j["finished"] = bisections_[id].finished.empty() ? nlohmann::json(nullptr) : nlohmann::json(bisections_[id].finished);
    model_.bisections.push_back(std::move(j));
  }
}

void Daemon::resume_bisections() {
  for (auto& [id, e] : bisections_)
    if (!e.b->done()) bisection_changed(id);  // kept with its lost probes, then its next probes start
}

void Daemon::start_bisection(BisectSpec spec, const Caller& by, Reply reply) {
  if (!endpoints_ || stop_.stopping()) return reply(stop_.refusal());
  if (!mirror_ || !bisection_journal_)
    return reply(Answer::error(Outcome::BadRequest, !mirror_ ? "bisection needs runner.yml source: (this daemon runs its --root, not commits)"
                                                             : "bisections are off on this daemon (its journal could not keep them)"));
  const std::string id = "bisect-" + new_run_id();
  spdlog::info("bisection {} of {} / {} from {}: {}..{} (repeat {})", id, spec.job, spec.step.empty() ? "(its last step)" : spec.step, by.peer,
               spec.good.substr(0, 12), spec.bad.substr(0, 12), spec.repeat ? std::to_string(spec.repeat) : "auto");
  // The first-parent path is git's to say (blocking: the mirror may fetch): on a git worker, then here.
  boost::asio::post(*git_workers_, [this, id, spec = std::move(spec), reply]() mutable {
    std::vector<std::string> path;
    SourceResult got = mirror_->first_parent_path(spec.good, spec.bad, path);
    boost::asio::post(io_, [this, id, spec = std::move(spec), reply, got, path = std::move(path)]() mutable {
      if (!got.ok()) {
        const bool request = got.error == SourceError::BadCommit || got.error == SourceError::UnknownCommit;
        return reply(Answer::error(request ? Outcome::BadRequest : Outcome::Unavailable, got.message));
      }
      auto b = std::make_unique<Bisection>(id, std::move(spec), std::move(path));
      const std::size_t commits = b->json()["commits"].size();
      bisections_[id] = {std::move(b), iso_now(), "", {}};
      bisection_changed(id);
      reply(Answer{Outcome::Created, {{"id", id}, {"url", api_path::bisection(id)}, {"page", api_path::bisection_page(id)}, {"commits", commits}}});
    });
  });
}

Answer Daemon::cancel_bisection(const std::string& id, const Caller& by) {
  auto it = bisections_.find(id);
  if (it == bisections_.end()) return Answer::error(Outcome::NotFound, "no bisection " + id);
  Bisection& b = *it->second.b;
  if (b.done()) return Answer{Outcome::Ok, {{"id", id}, {"state", to_string(b.state())}}};
  for (const std::string& run : b.stop(BisectState::Cancelled, "cancelled by " + (by.peer.empty() ? std::string("an admin") : by.peer)))
    cancel_run(run, own_caller("bisection " + id));
  spdlog::info("bisection {} cancelled by {}", id, by.peer);
  bisection_changed(id);
  return Answer{Outcome::Accepted, {{"id", id}, {"state", "cancelled"}}};
}

void Daemon::pump_bisection(const std::string& id) {
  auto it = bisections_.find(id);
  if (it == bisections_.end() || it->second.b->done() || stop_.stopping()) return;
  for (int probe : it->second.b->wanted()) {
    BisectionEntry& e = bisections_[id];
    if (e.submitting.count(probe) || !e.b->is_wanted(probe)) continue;  // a reply made inside this loop moved on
    e.submitting.insert(probe);
    const BisectSpec& spec = e.b->spec();
    RunSubmission s;
    s.jobs = {spec.job};
    s.sha = e.b->sha_of(probe);
    s.ref = "refs/pto-runner/bisect/" + id;
    s.probe = RunSubmission::Probe{spec.job, spec.step, spec.test.empty() ? std::vector<std::string>{} : std::vector<std::string>{spec.test},
                                   kProbePriority, "bisection " + id};
    submit_run(std::move(s), own_caller("bisection " + id), [this, id, probe](Answer a) {
      auto found = bisections_.find(id);
      if (found == bisections_.end()) return;
      found->second.submitting.erase(probe);
      Bisection& b = *found->second.b;
      const std::string run = a.outcome == Outcome::Created ? a.body.value("id", "") : "";
      if (b.done() || !b.is_wanted(probe)) {
        if (!run.empty()) cancel_run(run, own_caller("bisection " + id));
        return;
      }
      std::vector<std::string> unneeded;
      if (!run.empty()) {
        b.started(probe, run);
        probe_runs_[run] = id;
      } else {
        // Its commit's definitions do not load or lack the step: said, not guessed. The host failing it (a
        // mirror that cannot fetch) says nothing of the commit. Either way there is no run to link.
        const std::string why = a.body.value("error", "the run could not be made");
        spdlog::warn("bisection {}: no run for {}: {}", id, b.sha_of(probe).substr(0, 12), why);
        unneeded = b.refused(probe, a.outcome == Outcome::BadRequest ? ProbeOutcome::Missing : ProbeOutcome::Inconclusive, why);
      }
      for (const std::string& r : unneeded) cancel_run(r, own_caller("bisection " + id));
      bisection_changed(id);
    });
  }
}

bool Daemon::probe_finished(HostedRun& run) {
  auto it = probe_runs_.find(run.id());
  if (it == probe_runs_.end()) return false;
  const std::string id = it->second;
  probe_runs_.erase(it);
  auto found = bisections_.find(id);
  if (found == bisections_.end() || found->second.b->done()) return true;
  Bisection& b = *found->second.b;
  const RunEngine& e = run.engine();
  ProbeVerdict v = judge_probe(e.record(), e.plan(), b.spec().job, b.spec().test);
  if (e.record().cancelled && v.outcome != ProbeOutcome::Fail)
    v = {ProbeOutcome::Inconclusive, "its run was cancelled" + (e.record().cancel_reason.empty() ? "" : ": " + e.record().cancel_reason)};
  spdlog::info("bisection {}: {} at {}: {} ({})", id, run.id(), b.json()["commits"].empty() ? "" : run.request().value("sha", "").substr(0, 12),
               to_string(v.outcome), v.detail);
  for (const std::string& r : b.finished(run.id(), v.outcome, v.detail)) cancel_run(r, own_caller("bisection " + id));
  bisection_changed(id);
  return true;
}

void Daemon::bisection_changed(const std::string& id) {
  BisectionEntry& e = bisections_[id];
  const bool ended = e.b->done() && e.finished.empty();
  if (ended) e.finished = iso_now();
  nlohmann::json j = e.b->json();
  if (bisection_journal_ && !bisection_journal_->save(id, to_string(e.b->state()), {{"bisection", j}, {"created", e.created}, {"finished", e.finished}},
                                                       epoch_now()))
    spdlog::error("bisection {} not kept: {}", id, bisection_journal_->error());
  j["created"] = e.created;
  j["finished"] = e.finished.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.finished);
  auto at = std::find_if(model_.bisections.begin(), model_.bisections.end(), [&](const nlohmann::json& b) { return b["id"] == id; });
  if (at != model_.bisections.end()) *at = std::move(j);
  else model_.bisections.insert(model_.bisections.begin(), std::move(j));
  if (ended) {
    if (auto c = e.b->culprit()) spdlog::info("bisection {} found {} ({} runs)", id, *c, e.b->runs_used());
    else spdlog::info("bisection {} ended {}: {}", id, to_string(e.b->state()), e.b->error());
    notices_->bisection_done(*e.b);
    return;
  }
  pump_bisection(id);
}

}  // namespace pto
