// The daemon's notifications (SPEC "On-call hears it first"; docs/operators.md, "Notifications"): what happens
// on this host becomes a NotifyEvent here, on the engine thread, and the Notifier (notify/notifier) keeps it in
// the outbox for every receiver that wants it and delivers it on its own thread. Events:
//   card-bad, card-retired, card-returned   the pool's health changes (sched/device_pool's hook)
//   main-red                                a step of a run of runner.yml main-branch failed (grouped by run)
//   ran-no-tests                            a step with tests: ran none (grouped by run)
//   new-flaky-test                          a test flaky in this run and not on this ref before, in the window
//   queue-stuck                             the queue's oldest entry waited notify.queue-stuck-minutes
// Text from a run (failed tests' messages, verdicts) is masked with the run's secrets before it is kept.
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "config/device_spec.h"
#include "daemon/daemon.h"
#include "notify/notifier.h"
#include "read_model/card_history.h"
#include "store/case_history_queries.h"
#include "util/api_paths.h"
#include "util/secret_mask.h"
#include "util/state_paths.h"

namespace pto {

namespace {

std::string this_host() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

/// "main", "pull_request" or "other", as the ran-no-tests counter's label says a run's ref.
std::string branch_class(const std::string& ref, const std::string& main_ref) {
  if (ref == main_ref) return "main";
  if (ref.rfind("refs/pull/", 0) == 0) return "pull_request";
  return "other";
}

}  // namespace

void Daemon::open_notify() {
  if (cfg_.notify.receivers.empty()) return;
  // Its status changes on its own thread: the read model is refreshed on this one. (The queue's oldest wait
  // needs no timer: while anything waits the model is refreshed every second, daemon/model_refresh.)
  notifier_ = std::make_unique<Notifier>(journal_file(state_dir_), cfg_.notify, this_host(),
                                         [this] { boost::asio::post(io_, [this] { view_changed(); }); });
  if (std::string e = notifier_->start(); !e.empty()) {
    spdlog::error("notifications are off: {}", e);
    notifier_.reset();
    return;
  }
  for (const NotifyReceiver& r : cfg_.notify.receivers)
    spdlog::info("notify: {} ({}, {})", r.name, to_string(r.kind), shown_url(r.url));
}

void Daemon::notify_card(int card, CardHealth from, CardHealth to, const std::string& why) {
  if (!notifier_) return;
  NotifyEvent e;
  e.at = epoch_now();
  e.group = "card:" + std::to_string(card);
  e.link = url() + api_path::kCardsPage;
  e.details = {{"card", card}, {"from", to_string(from)}, {"to", to_string(to)}, {"why", why}};
  if (to == CardHealth::Bad || to == CardHealth::Retired) {
    e.kind = to == CardHealth::Bad ? "card-bad" : "card-retired";
    e.title = "card " + std::to_string(card) + (to == CardHealth::Bad ? " is bad: drained" : " is retired");
    e.lines.push_back(why);
    e.lines.push_back(to == CardHealth::Bad ? "it is probed and returns after passing health checks (health.check), or with `pto-runner devices --undrain " +
                                                   std::to_string(card) + "` once fixed"
                                             : "back only by a person: `pto-runner devices --undrain " + std::to_string(card) + "`");
  } else if (to == CardHealth::Good) {
    e.kind = "card-returned";
    e.title = "card " + std::to_string(card) + " is back in service (was " + to_string(from) + ")";
  } else {
    return;
  }
  notifier_->notify(e);
}

void Daemon::notify_step_final(const RunRecord& r, const Plan& p, int job, int step) {
  const StepRecord& s = r.jobs[job].steps[step];
  const PlanStep& ps = p.jobs[job].steps[step];
  HostedRun* run = find_run(r.id);
  if (run && run->request().contains("probe")) return;  // a bisection's probe or a control: its own story, not main's
  const std::string ref = run ? run->request().value("ref", "") : "";
  const bool failed = s.state == StepState::Failed || s.state == StepState::TimedOut;
  const bool no_tests = failed && ps.tests.any() && s.error.rfind("ran no tests", 0) == 0;
  if (no_tests) model_.metrics.ran_no_tests_by_branch[branch_class(ref, cfg_.main_ref)]++;
  if (!notifier_) return;
  const SecretMask* mask = run ? &run->engine().mask() : nullptr;
  auto masked = [&](const std::string& text) { return mask ? mask->apply(text) : text; };
  const std::string label = step_label(p.jobs[job], ps);
  const std::string sha = run ? run->request().value("sha", "") : "";
  auto event = [&](const char* kind, const std::string& title) {
    NotifyEvent e;
    e.kind = kind;
    e.ref = ref;
    e.at = epoch_now();
    e.group = std::string(kind) + ":run:" + r.id;
    e.title = masked(title);
    e.link = url() + "/runs/" + r.id;
    e.details = {{"run", r.id}, {"step", label}, {"ref", ref}, {"sha", sha}, {"state", to_string(s.state)}, {"cause", s.cause}};
    return e;
  };
  if (failed && !ref.empty() && ref == cfg_.main_ref && !ps.continue_on_error) {
    NotifyEvent e = event("main-red", ref.substr(ref.rfind('/') + 1) + " is red: " + label + " " + to_string(s.state) +
                                          (s.cause.empty() ? "" : " (" + s.cause + ")"));
    if (!s.verdict.empty()) e.lines.push_back(masked(s.verdict));
    else if (!s.error.empty()) e.lines.push_back(masked(s.error));
    // Its failed tests (each at its last attempt), at most 10: what a person opens first.
    int shown = 0;
    nlohmann::json failed_tests = nlohmann::json::array();
    for (const std::string& id : s.tests_summary.unresolved) {
      for (auto it = s.tests.rbegin(); it != s.tests.rend(); ++it) {
        if (it->id != id) continue;
        const std::string message = it->message.substr(0, it->message.find('\n'));
        const std::string cards = it->cards.empty() ? "" : ", card " + join_ids(it->cards);
        if (shown++ < 10)
          e.lines.push_back(masked("FAILED " + id + " [" + to_string(it->result) + (it->cause ? ", " + to_string(*it->cause) : "") + cards + "]" +
                                   (message.empty() ? "" : ": " + message.substr(0, 300))));
        failed_tests.push_back(masked(id));
        break;
      }
    }
    if (shown > 10) e.lines.push_back(std::to_string(shown - 10) + " more failed tests on the run page");
    e.details["failed_tests"] = failed_tests;
    e.lines.push_back("run " + r.id + (sha.empty() ? "" : " at " + sha.substr(0, 12)));
    notifier_->notify(e);
  }
  if (no_tests) {
    NotifyEvent e = event("ran-no-tests", label + " ran no tests" + (ref.empty() ? "" : " on " + ref));
    e.lines.push_back(masked(s.error));
    e.lines.push_back("run " + r.id + (sha.empty() ? "" : " at " + sha.substr(0, 12)));
    notifier_->notify(e);
  }
  // Tests flaky here (failed, then passed on this commit) that were not on this ref within tests.window-days.
  if (ps.tests.any() && !s.tests.empty() && !ref.empty()) {
    TestHistoryQueries history(journal_file(state_dir_));
    const double since = epoch_now() - cfg_.tests.window_days * 86400;
    std::set<std::string> told;
    for (const TestCase& c : s.tests) {
      if (c.cause != FailureCause::Flaky || !told.insert(c.id).second) continue;
      if (history.flaky_before(c.id, ref, since, r.id)) continue;
      NotifyEvent e = event("new-flaky-test", "new flaky test on " + ref + ": " + c.id);
      e.lines.push_back("failed, then passed on a rerun of the same commit (" + label + ")");
      e.details["test"] = masked(c.id);
      notifier_->notify(e);
    }
  }
}

void Daemon::notify_queue(const HostView& v) {
  if (!notifier_) return;
  const double limit = notifier_->queue_stuck_minutes() * 60;
  const double oldest = v.oldest_wait_seconds;  // without a bisection's probes and control runs (model_refresh)
  if (oldest < limit) {
    queue_stuck_told_ = false;
    return;
  }
  if (queue_stuck_told_) return;
  queue_stuck_told_ = true;
  NotifyEvent e;
  e.kind = "queue-stuck";
  e.group = "queue";
  e.at = epoch_now();
  e.title = "the queue is stuck: its oldest entry has waited " + std::to_string(static_cast<int>(oldest / 60)) + " min";
  for (std::size_t i = 0; i < v.queue.size() && i < 5; ++i) e.lines.push_back(v.queue[i].label + ": " + v.queue[i].reason);
  e.link = url() + "/";
  e.details = {{"oldest_wait_seconds", oldest}, {"queue_length", v.queue.size()}};
  notifier_->notify(e);
}

void Daemon::reload_notify(const RunnerConfig& next, const std::function<void(const std::string&)>& say) {
  auto text = [](const NotifyConfig& n) {
    std::string t = "queue-stuck-minutes=" + std::to_string(n.queue_stuck_minutes) + " group-seconds=" + std::to_string(n.group_seconds) +
                    " retry-max-seconds=" + std::to_string(n.retry_max_seconds);
    for (const auto& r : n.receivers) {
      t += " " + r.name + "=" + to_string(r.kind) + ":" + r.url + ":" + r.secret_file + ":";
      for (const auto& e : r.events) t += e + ",";
      for (const auto& g : r.refs) t += g + ",";
    }
    return t;
  };
  if (text(next.notify) == text(cfg_.notify)) return;
  std::string names;
  for (const auto& r : next.notify.receivers) names += (names.empty() ? "" : ", ") + r.name;
  say("notify changed: " + (names.empty() ? std::string("no receivers") : names));
  if (notifier_) {
    notifier_->reconfigure(next.notify);
  } else {
    cfg_.notify = next.notify;
    open_notify();
  }
}

}  // namespace pto
