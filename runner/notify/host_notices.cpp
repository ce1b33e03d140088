#include "notify/host_notices.h"

#include <unistd.h>

#include <set>

#include <spdlog/spdlog.h>

#include "bisect/bisection.h"
#include "config/device_spec.h"
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

}  // namespace

HostNotices::HostNotices(std::string journal, std::function<std::string()> base_url, std::function<void()> changed)
    : journal_(std::move(journal)), base_url_(std::move(base_url)), changed_(std::move(changed)) {}

HostNotices::~HostNotices() = default;

void HostNotices::open(const RunnerConfig& cfg) {
  cfg_ = cfg.notify;
  main_ref_ = cfg.main_ref;
  window_days_ = cfg.tests.window_days;
  if (cfg_.receivers.empty()) return;
  notifier_ = std::make_unique<Notifier>(journal_, cfg_, this_host(), changed_);
  if (std::string e = notifier_->start(); !e.empty()) {
    spdlog::error("notifications are off: {}", e);
    notifier_.reset();
    return;
  }
  for (const NotifyReceiver& r : cfg_.receivers)
    spdlog::info("notify: {} ({}, {})", r.name, to_string(r.kind), shown_url(r.url));
}

std::vector<ReceiverStatus> HostNotices::status() const { return notifier_ ? notifier_->status() : std::vector<ReceiverStatus>{}; }

void HostNotices::card(int card, CardHealth from, CardHealth to, const std::string& why) {
  if (!notifier_) return;
  NotifyEvent e;
  e.at = epoch_now();
  e.group = "card:" + std::to_string(card);
  e.link = base_url_() + api_path::kCardsPage;
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

void HostNotices::step_final(const RunRecord& r, const Plan& p, int job, int step, const NoticedRun& run) {
  if (!notifier_) return;
  const StepRecord& s = r.jobs[job].steps[step];
  const PlanStep& ps = p.jobs[job].steps[step];
  const std::string& ref = run.ref;
  const bool failed = s.state == StepState::Failed || s.state == StepState::TimedOut;
  const bool no_tests = failed && ps.tests.any() && s.error.rfind("ran no tests", 0) == 0;
  const SecretMask* mask = run.mask;
  auto masked = [&](const std::string& text) { return mask ? mask->apply(text) : text; };
  const std::string label = step_label(p.jobs[job], ps);
  const std::string& sha = run.sha;
  auto event = [&](const char* kind, const std::string& title) {
    NotifyEvent e;
    e.kind = kind;
    e.ref = ref;
    e.at = epoch_now();
    e.group = std::string(kind) + ":run:" + r.id;
    e.title = masked(title);
    e.link = base_url_() + "/runs/" + r.id;
    e.details = {{"run", r.id}, {"step", label}, {"ref", ref}, {"sha", sha}, {"state", to_string(s.state)}, {"cause", s.cause}};
    return e;
  };
  if (failed && !ref.empty() && ref == main_ref_ && !ps.continue_on_error) {
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
    TestHistoryQueries history(journal_);
    const double since = epoch_now() - window_days_ * 86400;
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

void HostNotices::queue(const HostView& v) {
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
  e.link = base_url_() + "/";
  e.details = {{"oldest_wait_seconds", oldest}, {"queue_length", v.queue.size()}};
  notifier_->notify(e);
}

void HostNotices::bisection_done(const Bisection& b) {
  if (!notifier_) return;
  NotifyEvent e;
  e.kind = "bisect-done";
  e.group = "bisect:" + b.id();
  e.at = epoch_now();
  const auto c = b.culprit();
  const BisectSpec& s = b.spec();
  const std::string what = (s.test.empty() ? "" : s.test + " of ") + s.job + (s.step.empty() ? "" : " / " + s.step);
  e.title = c ? "bisection found " + c->substr(0, 12) + " for " + what : "bisection of " + what + " ended " + to_string(b.state());
  if (!c) e.lines.push_back(b.error());
  e.lines.push_back(std::to_string(b.runs_used()) + " probe runs between " + s.good.substr(0, 12) + " and " + s.bad.substr(0, 12));
  e.link = base_url_() + api_path::bisection_page(b.id());
  e.details = {{"bisection", b.id()}, {"culprit", c ? nlohmann::json(*c) : nlohmann::json(nullptr)}, {"state", to_string(b.state())}};
  notifier_->notify(e);
}

void HostNotices::reload(const RunnerConfig& next, const std::function<void(const std::string&)>& say) {
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
  main_ref_ = next.main_ref;
  window_days_ = next.tests.window_days;
  if (text(next.notify) == text(cfg_)) return;
  std::string names;
  for (const auto& r : next.notify.receivers) names += (names.empty() ? "" : ", ") + r.name;
  say("notify changed: " + (names.empty() ? std::string("no receivers") : names));
  if (notifier_) {
    cfg_ = next.notify;
    notifier_->reconfigure(next.notify);
  } else {
    open(next);
  }
}

}  // namespace pto
