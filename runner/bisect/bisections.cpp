#include "bisect/bisections.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "bisect/probe_verdict.h"
#include "source/git_mirror.h"
#include "store/bisection_journal.h"
#include "util/api_paths.h"
#include "util/clock.h"
#include "util/ids.h"
#include "util/iso_time.h"

namespace pto {

Bisections::Bisections(ProbeHost host, GitMirror* mirror, std::function<void(const std::string&, nlohmann::json)> show,
                       std::function<void(const Bisection&)> ended)
    : host_(std::move(host)), mirror_(mirror), show_(std::move(show)), ended_(std::move(ended)) {}

Bisections::~Bisections() = default;

nlohmann::json Bisections::shown(const Entry& e) const {
  nlohmann::json j = e.b->json();
  j["created"] = e.created;
  j["finished"] = e.finished.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.finished);
  return j;
}

std::string Bisections::open(const std::string& journal_file) {
  std::string error;
  journal_ = BisectionJournal::open(journal_file, error);
  if (!journal_) return error;
  for (const nlohmann::json& rec : journal_->load(200)) {
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
  // Shown oldest first: each new one goes to the top.
  std::vector<std::pair<std::string, std::string>> order;  // created, id
  for (const auto& [id, e] : bisections_) order.push_back({e.created, id});
  std::sort(order.begin(), order.end());
  for (const auto& [created, id] : order) show_(id, shown(bisections_[id]));
  return "";
}

void Bisections::resume() {
  for (auto& [id, e] : bisections_)
    if (!e.b->done()) changed(id);  // kept with its lost probes, then its next probes start
}

void Bisections::start(BisectSpec spec, const std::string& by, Reply reply) {
  if (!mirror_ || !journal_)
    return reply(Answer::error(Outcome::BadRequest, !mirror_ ? "bisection needs runner.yml source: (this daemon runs its --root, not commits)"
                                                             : "bisections are off on this daemon (its journal could not keep them)"));
  const std::string id = "bisect-" + new_run_id();
  spdlog::info("bisection {} of {} / {} from {}: {}..{} (repeat {})", id, spec.job, spec.step.empty() ? "(its last step)" : spec.step, by,
               spec.good.substr(0, 12), spec.bad.substr(0, 12), spec.repeat ? std::to_string(spec.repeat) : "auto");
  // The first-parent path is git's to say (blocking: the mirror may fetch): on a git worker, then here.
  auto path = std::make_shared<std::vector<std::string>>(), subjects = std::make_shared<std::vector<std::string>>();
  auto got = std::make_shared<SourceResult>();
  auto asked = std::make_shared<BisectSpec>(std::move(spec));
  host_.git([this, asked, path, subjects, got] { *got = mirror_->first_parent_path(asked->good, asked->bad, *path, subjects.get()); },
            [this, id, asked, path, subjects, got, reply] {
              if (!got->ok()) {
                const bool request = got->error == SourceError::BadCommit || got->error == SourceError::UnknownCommit;
                return reply(Answer::error(request ? Outcome::BadRequest : Outcome::Unavailable, got->message));
              }
              auto b = std::make_unique<Bisection>(id, std::move(*asked), std::move(*path));
              b->set_subjects(std::move(*subjects));
              const std::size_t commits = b->json()["commits"].size();
              bisections_[id] = {std::move(b), iso_now(), "", {}};
              changed(id);
              reply(Answer{Outcome::Created,
                           {{"id", id}, {"url", api_path::bisection(id)}, {"page", api_path::bisection_page(id)}, {"commits", commits}}});
            });
}

Answer Bisections::cancel(const std::string& id, const std::string& by) {
  auto it = bisections_.find(id);
  if (it == bisections_.end()) return Answer::error(Outcome::NotFound, "no bisection " + id);
  Bisection& b = *it->second.b;
  if (b.done()) return Answer{Outcome::Ok, {{"id", id}, {"state", to_string(b.state())}}};
  for (const std::string& run : b.stop(BisectState::Cancelled, "cancelled by " + (by.empty() ? std::string("an admin") : by)))
    host_.cancel(run, "bisection " + id);
  spdlog::info("bisection {} cancelled by {}", id, by);
  changed(id);
  return Answer{Outcome::Accepted, {{"id", id}, {"state", "cancelled"}}};
}

void Bisections::pump(const std::string& id) {
  auto it = bisections_.find(id);
  if (it == bisections_.end() || it->second.b->done() || host_.stopping()) return;
  for (int probe : it->second.b->wanted()) {
    Entry& e = bisections_[id];
    if (e.submitting.count(probe) || !e.b->is_wanted(probe)) continue;  // a reply made inside this loop moved on
    e.submitting.insert(probe);
    const BisectSpec& spec = e.b->spec();
    ProbeRun run{spec.job, spec.step, spec.test.empty() ? std::vector<std::string>{} : std::vector<std::string>{spec.test}, e.b->sha_of(probe),
                 "refs/pto-runner/bisect/" + id, kProbePriority, "bisection " + id};
    run.perf_against = spec.metric.empty() ? "" : spec.good;  // `bisect --metric`: compared with good on one card
    host_.submit(std::move(run), [this, id, probe](ProbeAnswer a) {
      auto found = bisections_.find(id);
      if (found == bisections_.end()) return;
      found->second.submitting.erase(probe);
      Bisection& b = *found->second.b;
      if (b.done() || !b.is_wanted(probe)) {
        if (!a.run.empty()) host_.cancel(a.run, "bisection " + id);
        return;
      }
      std::vector<std::string> unneeded;
      if (!a.run.empty()) {
        b.started(probe, a.run);
        probe_runs_[a.run] = id;
      } else {
        // Its commit's definitions do not load or lack the step: said, not guessed. The host failing it (a
        // mirror that cannot fetch) says nothing of the commit. Either way there is no run to link.
        spdlog::warn("bisection {}: no run for {}: {}", id, b.sha_of(probe).substr(0, 12), a.why);
        unneeded = b.refused(probe, a.commit_fault ? ProbeOutcome::Missing : ProbeOutcome::Inconclusive, a.why);
      }
      for (const std::string& r : unneeded) host_.cancel(r, "bisection " + id);
      changed(id);
    });
  }
}

bool Bisections::probe_finished(const std::string& run, const RunRecord& record, const Plan& plan, const std::string& sha) {
  auto it = probe_runs_.find(run);
  if (it == probe_runs_.end()) return false;
  const std::string id = it->second;
  probe_runs_.erase(it);
  auto found = bisections_.find(id);
  if (found == bisections_.end() || found->second.b->done()) return true;
  Bisection& b = *found->second.b;
  ProbeVerdict v = judge_probe(record, plan, b.spec().job, b.spec().test);
  if (record.cancelled && v.outcome != ProbeOutcome::Fail)
    v = {ProbeOutcome::Inconclusive, "its run was cancelled" + (record.cancel_reason.empty() ? "" : ": " + record.cancel_reason)};
  spdlog::info("bisection {}: {} at {}: {} ({})", id, run, sha.substr(0, 12), to_string(v.outcome), v.detail);
  for (const std::string& r : b.finished(run, v.outcome, v.detail)) host_.cancel(r, "bisection " + id);
  changed(id);
  return true;
}

void Bisections::changed(const std::string& id) {
  Entry& e = bisections_[id];
  const bool ended = e.b->done() && e.finished.empty();
  if (ended) e.finished = iso_now();
  if (journal_ &&
      !journal_->save(id, to_string(e.b->state()), {{"bisection", e.b->json()}, {"created", e.created}, {"finished", e.finished}}, epoch_now()))
    spdlog::error("bisection {} not kept: {}", id, journal_->error());
  show_(id, shown(e));
  if (ended) {
    if (auto c = e.b->culprit()) spdlog::info("bisection {} found {} ({} runs)", id, *c, e.b->runs_used());
    else spdlog::info("bisection {} ended {}: {}", id, to_string(e.b->state()), e.b->error());
    ended_(*e.b);
    return;
  }
  pump(id);
}

}  // namespace pto
