// The daemon's read model (server/read_model.h), refreshed on the engine thread after transitions: right
// after a burst of them (the next turn of the loop), at most once per 10 ms however many there are, never by a
// GET. A command (submit, cancel, drain) refreshes it before answering, so its client reads its own change.
// Everything the status, /metrics and the page show comes from here; the cards and nodes part is the host's
// to describe (host/host_cards.cpp).
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "daemon/daemon.h"
#include "exec/cgroup_tree.h"
#include "exec/process_marker.h"
#include "util/api_paths.h"

namespace pto {

namespace {
constexpr auto kViewInterval = std::chrono::milliseconds(10);
}  // namespace

RunOverview Daemon::overview_of(const std::string& id, const ActiveRun& r) const {
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
        o.running_logs.emplace_back(step_label(plan.jobs[k], plan.jobs[k].steps[i]), api_path::step_log(id, api_path::step_id(k, i)));
    }
  o.request = r.request;
  o.sha = r.request.value("sha", "");
  o.ref = r.request.value("ref", "");
  if (r.request.contains("github") && r.request["github"].contains("run_url"))
    o.github_run = r.request["github"]["run_url"].get<std::string>();
  return o;
}

void Daemon::view_changed() {
  if (view_refresh_pending_ || !view_timer_) return;
  view_refresh_pending_ = true;
  auto since = std::chrono::steady_clock::now() - view_refreshed_at_;
  if (since >= kViewInterval) {
    boost::asio::post(io_, [this] { refresh_view(); });
    return;
  }
  view_timer_->expires_after(kViewInterval - since);
  view_timer_->async_wait([this](boost::system::error_code ec) {
    if (!ec) refresh_view();
  });
}

void Daemon::refresh_view() {
  view_refresh_pending_ = false;
  view_refreshed_at_ = std::chrono::steady_clock::now();
  ++model_.generation;
  HostView& v = model_.host;
  v.draining = draining_;
  v.containment = CgroupTree::instance().available() ? "cgroup" : "process group + sweep";
  v.toolchain = toolchain_;
  v.sandbox.active = sandbox_->active();
  v.sandbox.why_not = sandbox_->why();
  v.sandbox.users = static_cast<int>(sandbox_->size());
  v.sandbox.lent = static_cast<int>(sandbox_->size() - sandbox_->free_count());
  v.sandbox.waiting.assign(waiting_for_user_.begin(), waiting_for_user_.end());
  model_.metrics.journal_failing = history_->journal_failing();
  model_.metrics.leases_by_end = leases_->ended_by_reason();

  // Which step of which run waits on a queue ticket, and runs on a card.
  HostOccupancy who;
  std::map<std::uint64_t, CardUser> waiting;
  v.active.clear();
  for (const auto& [id, r] : active_) {
    const RunRecord& rec = r->engine->record();
    const Plan& plan = r->engine->plan();
    for (std::size_t k = 0; k < rec.jobs.size(); ++k)
      for (std::size_t s = 0; s < rec.jobs[k].steps.size(); ++s) {
        const StepRecord& sr = rec.jobs[k].steps[s];
        if (sr.state != StepState::Waiting && sr.state != StepState::Running) continue;
        const PlanStep& ps = plan.jobs[k].steps[s];
        CardUser u;
        u.run = id;
        u.step = api_path::step_id(k, s);
        u.label = step_label(plan.jobs[k], ps);
        u.log_url = api_path::step_log(id, u.step);
        u.estimate = {ps.expected_minutes, ps.expected_source, ps.expected_samples};
        u.cards = sr.cards;
        u.node = sr.node;
        u.executor_job = sr.executor_job;
        if (sr.state == StepState::Waiting && sr.ticket) waiting[sr.ticket] = u;
        if (sr.state == StepState::Running) {
          for (int c : sr.cards) who.on_card[c] = u;
          if (!sr.node.empty()) who.placed.push_back(u);
        }
      }
    v.active.push_back(overview_of(id, *r));
  }
  for (const Lease* l : leases_->active())
    for (int c : l->cards) who.lease_run_of_card[c] = l->request.run_id;

  v.queue.clear();
  v.oldest_wait_seconds = 0;
  for (auto& q : host_->broker().queue()) {
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
    if (q.eta_seconds >= 0)
      e.eta = iso_time(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<long long>(q.eta_seconds * 1000)));
    e.priority = q.priority;
    e.run_card_seconds = q.run_used_card_seconds;
    e.fair_share_tag = q.tag;
    if (auto a = active_.find(q.share); a != active_.end() && a->second->request.contains("priority"))
      if (const auto& rule = a->second->request["priority"]["rule"]; rule.is_string()) e.priority_rule = rule.get<std::string>();
    // A step in the cluster's queue is known by its marker; a step in ours by its ticket.
    auto marker = q.marker.empty() ? std::nullopt : ProcessMarker::parse(q.marker);
    if (marker && marker->kind == ProcessMarker::Kind::Step) {
      e.run = marker->run;
      e.step = api_path::step_id(marker->job, marker->step);
    } else if (auto it = waiting.find(q.ticket); it != waiting.end() && q.marker.empty()) {
      e.run = it->second.run;
      e.step = it->second.step;
      e.estimate = it->second.estimate;
    }
    if (!e.run.empty()) {
      e.run_url = api_path::run(e.run);
      e.log_url = api_path::step_log(e.run, e.step);
    }
    v.oldest_wait_seconds = std::max(v.oldest_wait_seconds, e.wait_seconds);
    who.position_of_ticket[q.ticket] = e.position;
    v.queue.push_back(std::move(e));
  }
  host_->describe(v, who);
  // A card drained or returned since the last refresh (by a person, by its failures, by a reload): the cards'
  // history says when and why.
  for (const auto& c : v.cards) {
    const bool drained = c.state == "drained";
    auto [seen, fresh] = drained_seen_.emplace(c.id, drained);
    if (fresh || seen->second == drained) continue;  // the first sight (a restart) is no change
    seen->second = drained;
    const double at = epoch_now();
    history_->card_event({c.id, drained ? "drain" : "return", at, at, "", "", "", drained ? "drained" : "in service",
                          drained ? c.drain_reason : ""});
  }
  v.leases = lease_desk_->active_json();
  v.runs_by_result["running"] = static_cast<int>(active_.size());
  // Waits and busy times grow with no transition at all (a queue stuck behind a 2-hour step): while anything
  // waits or holds a card, refresh at least once a second, so /metrics and the page keep counting.
  bool busy = !v.queue.empty();
  for (const auto& c : v.cards) busy |= c.holder.has_value();
  for (const auto& n : v.nodes) busy |= !n.steps.empty();
  if (busy && !view_tick_armed_) {
    view_tick_armed_ = true;
    view_tick_->expires_after(std::chrono::seconds(1));
    view_tick_->async_wait([this](boost::system::error_code ec) {
      view_tick_armed_ = false;
      if (!ec) view_changed();
    });
  }
}

}  // namespace pto
