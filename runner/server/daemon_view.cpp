// The daemon's read model (server/host_view.h), refreshed on the engine thread after transitions: right
// after a burst of them (the next turn of the loop), at most once per 10 ms however many there are, never by a
// GET. An API mutation (submit, cancel, drain) refreshes it before answering, so its client reads its own
// change. Everything the status, /metrics and the page show comes from here.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <spdlog/spdlog.h>

#include "exec/cgroup_tree.h"
#include "server/daemon.h"
#include "slurm/slurm_command.h"
#include "server/status_json.h"
#include "util/json_text.h"

namespace pto {

namespace {
constexpr auto kViewInterval = std::chrono::milliseconds(10);
constexpr auto kStatusReuse = std::chrono::milliseconds(100);  // the rendered JSON, for the uptime field

std::string step_id(std::size_t job, std::size_t step) { return std::to_string(job + 1) + "-" + std::to_string(step + 1); }
std::string log_url(const std::string& run, const std::string& step) { return "/api/v1/runs/" + run + "/steps/" + step + "/log"; }
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
        o.running_logs.emplace_back(plan.jobs[k].id + " / " + plan.jobs[k].steps[i].name, log_url(id, step_id(k, i)));
    }
  o.request = r.request;
  o.sha = r.request.value("sha", "");
  o.ref = r.request.value("ref", "");
  if (r.request.contains("github") && r.request["github"].contains("run_url"))
    o.github_run = r.request["github"]["run_url"].get<std::string>();
  return o;
}

RunOverview Daemon::overview_of_finished(const nlohmann::json& record) {
  RunOverview o;
  o.id = record.value("id", "");
  o.state = record.value("state", "");
  o.created = record.value("created", "");
  o.finished = record.contains("finished") && record["finished"].is_string() ? record["finished"].get<std::string>() : "";
  o.result = record.contains("result") && record["result"].is_number_integer() ? record["result"].get<int>() : -1;
  o.request = record.value("request", nlohmann::json::object());
  if (o.request.is_object()) {
    o.sha = o.request.value("sha", "");
    o.ref = o.request.value("ref", "");
    if (o.request.contains("github") && o.request["github"].is_object() && o.request["github"].contains("run_url"))
      o.github_run = o.request["github"]["run_url"].get<std::string>();
  }
  return o;
}

void Daemon::view_changed() {
  status_json_cache_.clear();
  if (view_refresh_pending_) return;
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
  status_json_cache_.clear();
  HostView& v = view_;
  v.draining = draining_;
  v.containment = CgroupTree::instance().available() ? "cgroup" : "process group + sweep";
  v.toolchain = toolchain_;
  metrics_.journal_failing = journal_failing_;
  metrics_.leases_by_end = leases_->ended_by_reason();

  // Which step of which run waits on a queue ticket, and runs on a card.
  struct Where {
    std::string run, step;
    StepEstimate estimate;
  };
  std::map<std::uint64_t, Where> waiting;
  std::map<int, Where> on_card;
  v.active.clear();
  for (const auto& [id, r] : active_) {
    const RunRecord& rec = r->engine->record();
    for (std::size_t k = 0; k < rec.jobs.size(); ++k)
      for (std::size_t s = 0; s < rec.jobs[k].steps.size(); ++s) {
        const StepRecord& sr = rec.jobs[k].steps[s];
        const PlanStep& ps = r->engine->plan().jobs[k].steps[s];
        const Where where{id, step_id(k, s), {ps.expected_minutes, ps.expected_source, ps.expected_samples}};
        if (sr.state == StepState::Waiting && sr.ticket) waiting[sr.ticket] = where;
        if (sr.state == StepState::Running)
          for (int c : sr.cards) on_card[c] = where;
      }
    v.active.push_back(overview_of(id, *r));
  }
  std::map<int, std::string> lease_run_of_card;
  for (const Lease* l : leases_->active())
    for (int c : l->cards) lease_run_of_card[c] = l->request.run_id;

  std::map<std::uint64_t, int> position_of_ticket;
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
    if (!q.marker.empty()) {  // a step in Slurm's queue: RUN/JOB/STEP/ATTEMPT (a lease's: [RUN/]lease/ID)
      auto a = q.marker.find('/'), b = q.marker.find('/', a + 1), c = q.marker.find('/', b + 1);
      auto digits = [&](std::size_t from, std::size_t to) {
        return to > from && q.marker.find_first_not_of("0123456789", from) >= to && to - from < 9;
      };
      if (c != std::string::npos && digits(a + 1, b) && digits(b + 1, c)) {
        e.run = q.marker.substr(0, a);
        e.step = step_id(std::stoul(q.marker.substr(a + 1, b - a - 1)), std::stoul(q.marker.substr(b + 1, c - b - 1)));
        e.run_url = "/api/v1/runs/" + e.run;
        e.log_url = log_url(e.run, e.step);
      }
    } else if (auto it = waiting.find(q.ticket); it != waiting.end()) {
      e.run = it->second.run;
      e.step = it->second.step;
      e.estimate = it->second.estimate;
      e.run_url = "/api/v1/runs/" + e.run;
      e.log_url = log_url(e.run, e.step);
    }
    v.oldest_wait_seconds = std::max(v.oldest_wait_seconds, e.wait_seconds);
    position_of_ticket[q.ticket] = e.position;
    v.queue.push_back(std::move(e));
  }

  v.cards.clear();
  v.nodes.clear();
  v.usable_cards = 0;
  if (host_->slurm) {
    slurm_view(v);
  } else {
  const auto& reserved = dispatcher_->reserved();
  for (const auto& c : pool_->status(reserved)) {
    CardView cv;
    cv.id = c.id;
    cv.state = to_string(c.state);
    cv.type = c.type;
    cv.group = c.group;
    cv.since = c.since;
    cv.drain_reason = c.drain_reason;
    cv.consecutive_infra_failures = c.consecutive_infra_failures;
    cv.busy_seconds = c.busy_seconds;
    v.usable_cards += c.state != CardState::Drained;
    if (!c.holder.empty()) {
      HolderView h;
      h.other_program = c.held_outside;
      // Locked by a program pto-runner does not run (the incumbent task-submit, a person's script): say so.
      h.label = c.held_outside ? "another program holds " + c.lock_file + " (" + c.holder + ")" : c.holder;
      if (auto it = on_card.find(c.id); it != on_card.end() && !c.held_outside) {
        h.run = it->second.run;
        h.step = it->second.step;
        h.estimate = it->second.estimate;
        h.log_url = log_url(h.run, h.step);
      } else if (auto l = lease_run_of_card.find(c.id); l != lease_run_of_card.end() && !l->second.empty()) {
        h.run = l->second;
      }
      cv.holder = std::move(h);
    }
    if (auto it = reserved.find(c.id); it != reserved.end() && c.state == CardState::Reserved)
      if (auto p = position_of_ticket.find(it->second); p != position_of_ticket.end()) cv.reserved_for_position = p->second;
    v.cards.push_back(std::move(cv));
  }
  }
  v.leases = leases_json();
  v.runs_by_result = runs_by_result_;
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

void Daemon::slurm_view(HostView& v) const {
  const SlurmCluster& cluster = *host_->slurm;
  v.executor = "slurm";
  v.slurm_problem = cluster.problem();
  for (const auto& n : cluster.nodes()) {
    NodeView nv;
    nv.name = n.name;
    nv.state = n.state;
    nv.reason = n.reason;
    nv.features = n.features;
    nv.drained = n.drained();
    for (const auto& [type, count] : n.total) nv.cards += count;
    for (const auto& [type, count] : n.used) nv.cards_used += count;
    if (!nv.drained) v.usable_cards += nv.cards;
    v.nodes.push_back(std::move(nv));
  }
  // The node a step runs on, also one the last snapshot did not list (yet).
  auto node_named = [&v](const std::string& name) -> NodeView& {
    for (auto& n : v.nodes)
      if (n.name == name) return n;
    v.nodes.push_back({});
    v.nodes.back().name = name;
    v.nodes.back().state = "unknown";
    return v.nodes.back();
  };
  // Leases' commands running in Slurm (task-submit under executor: slurm), as Slurm shows them; their job is
  // named after the lease's marker, [RUN/]lease/ID.
  for (const auto& j : cluster.jobs()) {
    const std::string marker = marker_of_job(j.name);
    const auto lease = marker.rfind("lease/", std::string::npos);
    if (j.pending() || j.node.empty() || lease == std::string::npos) continue;
    SlurmStepView sv;
    sv.job = j.id;
    sv.label = marker.substr(lease + 6);
    if (lease > 0) sv.run = marker.substr(0, lease - 1);
    sv.cards = j.cards;
    node_named(j.node).steps.push_back(std::move(sv));
  }
  // Where each placed step of ours runs, from the engines' records (exact: what the step's wrapper said).
  for (const auto& [id, r] : active_) {
    const RunRecord& rec = r->engine->record();
    for (std::size_t k = 0; k < rec.jobs.size(); ++k)
      for (std::size_t s = 0; s < rec.jobs[k].steps.size(); ++s) {
        const StepRecord& sr = rec.jobs[k].steps[s];
        if (sr.state != StepState::Running || sr.node.empty()) continue;
        SlurmStepView sv;
        sv.job = sr.executor_job;
        sv.label = r->engine->plan().jobs[k].id + " / " + r->engine->plan().jobs[k].steps[s].name;
        sv.run = id;
        sv.step = step_id(k, s);
        sv.log_url = log_url(id, sv.step);
        sv.cards = sr.cards;
        node_named(sr.node).steps.push_back(std::move(sv));
      }
  }
}

std::string Daemon::status_body(bool full_queue) {
  if (full_queue) return dump_json(status_to_json(view_, true, uptime()));
  // Hundreds of pollers cost one rendering per change (or per 100 ms, for the uptime).
  auto now = std::chrono::steady_clock::now();
  if (status_json_cache_.empty() || now - status_json_at_ > kStatusReuse) {
    status_json_cache_ = dump_json(status_to_json(view_, false, uptime()));
    status_json_at_ = now;
  }
  return status_json_cache_;
}

void Daemon::remember_finished(const nlohmann::json& record) {
  RunOverview o = overview_of_finished(record);
  runs_by_result_[o.state]++;
  view_.recent.push_front(std::move(o));
  while (view_.recent.size() > kRecentRuns) view_.recent.pop_back();
  view_changed();
}

void Daemon::load_history_view() {
  view_.recent.clear();
  for (const auto& s : journal_->list_runs(static_cast<int>(kRecentRuns))) {
    if (s.state == "running") continue;
    nlohmann::json rec = {{"id", s.id}, {"state", s.state}, {"created", s.created}, {"finished", s.finished},
                          {"result", s.result}, {"request", s.request}};
    view_.recent.push_back(overview_of_finished(rec));
  }
  runs_by_result_ = journal_->runs_by_state();
  runs_by_result_.erase("running");
}

}  // namespace pto
