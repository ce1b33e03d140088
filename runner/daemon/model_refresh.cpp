#include "daemon/model_refresh.h"

#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>

#include "engine/engine.h"
#include "exec/process_marker.h"
#include "util/api_paths.h"
#include "util/ids.h"
#include "util/iso_time.h"
#include "util/clock.h"

namespace pto {

namespace {
constexpr auto kInterval = std::chrono::milliseconds(10);
// A refresh of a large host (thousands of steps queued) walks them all: the wait between refreshes grows with
// what one costs, so they take at most a fortieth of the engine thread (a tenth was 10% of the daemon's work
// in the dispatch benchmark, 1,000 steps queued, a twentieth 7%: bench/README.md), and the status lags by at
// most this much.
constexpr auto kMaxInterval = std::chrono::milliseconds(100);
constexpr int kCostShare = 40;
}  // namespace

ModelRefresh::ModelRefresh(boost::asio::io_context& io)
    : io_(io),
      soon_(std::make_unique<boost::asio::steady_timer>(io)),
      tick_(std::make_unique<boost::asio::steady_timer>(io)) {}

ModelRefresh::~ModelRefresh() = default;

void ModelRefresh::changed() {
  if (pending_ || stopped_ || !from_) return;
  pending_ = true;
  auto since = steady_now() - refreshed_at_;
  if (since >= interval_) {
    boost::asio::post(io_, [this] {
      if (pending_ && !stopped_) now();
    });
    return;
  }
  soon_->expires_after(interval_ - since);
  soon_->async_wait([this](boost::system::error_code ec) {
    if (!ec && pending_ && !stopped_) now();
  });
}

void ModelRefresh::refreshed(bool busy, std::chrono::steady_clock::time_point began) {
  pending_ = false;
  refreshed_at_ = steady_now();
  const auto cost = std::chrono::duration_cast<std::chrono::steady_clock::duration>(refreshed_at_ - began);
  interval_ = std::clamp<std::chrono::steady_clock::duration>(cost * kCostShare, kInterval, kMaxInterval);
  if (!busy || tick_armed_ || stopped_) return;
  tick_armed_ = true;
  tick_->expires_after(std::chrono::seconds(1));
  tick_->async_wait([this](boost::system::error_code ec) {
    tick_armed_ = false;
    if (!ec) changed();
  });
}

std::vector<CardEvent> ModelRefresh::drain_changes(const HostView& v, double now) { return pto::drain_changes(v, drained_seen_, now); }

void ModelRefresh::stop() {
  stopped_ = true;
  soon_->cancel();
  tick_->cancel();
}

namespace {

RunOverview overview_of(const std::string& id, const ActiveRunRef& r) {
  RunOverview o;
  const RunRecord& rec = r.engine->record();
  o.id = id;
  o.state = rec.cancelled ? "cancelling" : "running";
  o.created = rec.created;
  const Plan& plan = r.engine->plan();
  for (std::size_t k = 0; k < rec.jobs.size(); ++k)
    for (std::size_t i = 0; i < rec.jobs[k].steps.size(); ++i) {
      const StepRecord& s = rec.jobs[k].steps[i];
      ++o.steps;
      o.steps_running += s.state == StepState::Running;
      o.steps_waiting += s.state == StepState::Waiting;
      o.steps_finished += is_final(s.state);
      if (s.state == StepState::Running)
        o.running_logs.emplace_back(step_label(plan.jobs[k], plan.jobs[k].steps[i]), api_path::step_log(id, StepId{k, i}.text()));
    }
  o.request = *r.request;
  o.sha = r.request->value("sha", "");
  o.ref = r.request->value("ref", "");
  if (r.request->contains("github") && (*r.request)["github"].contains("run_url"))
    o.github_run = (*r.request)["github"]["run_url"].get<std::string>();
  return o;
}

}  // namespace

HostOccupancy describe_runs(ReadModel& model, std::vector<QueueEntry> queue, const std::vector<const Lease*>& leases) {
  HostView& v = model.host;
  // Which step of which run waits on a queue ticket, and runs on a card.
  HostOccupancy who;
  struct WaitingStep {  // what a queue entry shows of the step behind its ticket
    const std::string* run;
    StepId step;
    const PlanStep* plan;
  };
  std::unordered_map<std::uint64_t, WaitingStep> waiting;
  v.active.clear();
  for (const auto& [id, r] : model.active) {
    const RunRecord& rec = r.engine->record();
    const Plan& plan = r.engine->plan();
    for (std::size_t k = 0; k < rec.jobs.size(); ++k)
      for (std::size_t s = 0; s < rec.jobs[k].steps.size(); ++s) {
        const StepRecord& sr = rec.jobs[k].steps[s];
        if (sr.state == StepState::Waiting && sr.ticket) waiting[sr.ticket] = {&id, StepId{k, s}, &plan.jobs[k].steps[s]};
        if (sr.state != StepState::Running) continue;  // a waiting step shows in its queue entry, below
        const PlanStep& ps = plan.jobs[k].steps[s];
        CardUser u;
        u.run = id;
        u.step = StepId{k, s}.text();
        u.label = step_label(plan.jobs[k], ps);
        u.log_url = api_path::step_log(id, u.step);
        u.estimate = {ps.expected_minutes, ps.expected_source, ps.expected_samples};
        u.cards = sr.cards;
        u.node = sr.node;
        u.executor_job = sr.executor_job;
        for (int c : sr.cards) who.on_card[c] = u;
        if (!sr.node.empty()) who.placed.push_back(u);
      }
    v.active.push_back(overview_of(id, r));
  }
  for (const Lease* l : leases)
    for (int c : l->cards) who.lease_run_of_card[c] = l->request.run_id;

  // Each ticket's first forecast is kept from refresh to refresh (a client asking what changed is sent it once).
  std::unordered_map<std::uint64_t, std::uint64_t> forecast_since;
  for (const QueueView& e : v.queue)
    if (e.forecast_since) forecast_since.emplace(e.ticket, e.forecast_since);
  v.queue.clear();
  v.oldest_wait_seconds = 0;
  for (auto& q : queue) {
    QueueView e;
    e.position = static_cast<int>(v.queue.size()) + 1;
    e.ticket = q.ticket;
    e.label = std::move(q.label);
    e.devices = q.devices;
    e.reason = std::move(q.reason);
    e.cluster_reason = std::move(q.cluster_reason);
    e.wait_seconds = q.waited_seconds;
    e.since = std::move(q.since);
    e.eta_seconds = q.eta_seconds;
    if (q.eta_seconds >= 0) {
      e.eta = iso_time(wall_now() + std::chrono::milliseconds(static_cast<long long>(q.eta_seconds * 1000)));
      auto seen = forecast_since.find(q.ticket);
      e.forecast_since = seen != forecast_since.end() ? seen->second : model.generation;
    }
    e.priority = q.priority;
    e.run_card_seconds = q.run_used_card_seconds;
    e.fair_share_tag = q.tag;
    if (auto a = model.active.find(q.share); a != model.active.end() && a->second.request->contains("priority"))
      if (const auto& rule = (*a->second.request)["priority"]["rule"]; rule.is_string()) e.priority_rule = rule.get<std::string>();
    // A step in the cluster's queue is known by its marker; a step in ours by its ticket.
    auto marker = q.marker.empty() ? std::nullopt : ProcessMarker::parse(q.marker);
    if (marker && marker->kind == ProcessMarker::Kind::Step) {
      e.run = marker->run;
      e.step = StepId{static_cast<std::size_t>(marker->job), static_cast<std::size_t>(marker->step)}.text();
    } else if (auto it = waiting.find(q.ticket); it != waiting.end() && q.marker.empty()) {
      const PlanStep& ps = *it->second.plan;
      e.run = *it->second.run;
      e.step = it->second.step.text();
      e.estimate = {ps.expected_minutes, ps.expected_source, ps.expected_samples};
    }
    if (!e.run.empty()) {
      e.run_url = api_path::run(e.run);
      e.log_url = api_path::step_log(e.run, e.step);
    }
    // A bisection's probes and control runs wait below everything by design: they do not make the queue old.
    const auto owner = model.active.find(q.share);
    e.probe = owner != model.active.end() && owner->second.request && owner->second.request->contains("probe");
    if (!e.probe) v.oldest_wait_seconds = std::max(v.oldest_wait_seconds, e.wait_seconds);
    who.position_of_ticket[q.ticket] = e.position;
    v.queue.push_back(std::move(e));
  }
  return who;
}

bool host_busy(const HostView& v) {
  bool busy = !v.queue.empty();
  for (const auto& c : v.cards) busy |= c.holder.has_value();
  for (const auto& n : v.nodes) busy |= !n.steps.empty();
  return busy;
}

std::vector<CardEvent> drain_changes(const HostView& v, std::map<int, bool>& seen, double now) {
  std::vector<CardEvent> out;
  for (const auto& c : v.cards) {
    const bool drained = c.state == "drained";
    auto [was, fresh] = seen.emplace(c.id, drained);
    if (fresh || was->second == drained) continue;  // the first sight (a restart) is no change
    was->second = drained;
    out.push_back({c.id, drained ? "drain" : "return", now, now, "", "", "", drained ? "drained" : "in service", drained ? c.drain_reason : ""});
  }
  return out;
}

}  // namespace pto
