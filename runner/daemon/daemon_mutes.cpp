// The daemon's part in test results (docs/maintainers.md, "Test results"): its mutes, runner.yml's and the
// API's together (the API's kept in the test history, so a restart keeps them), what every run asks when a test
// fails, and what the read model shows of them. Recording each step's tests is the reporter's
// (daemon/run_reporter); the queries are store/case_history_queries.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"
#include "store/run_history.h"
#include "store/case_history_queries.h"
#include "util/iso_time.h"
#include "util/state_paths.h"

namespace pto {

namespace {
// Who made a mute, as it is kept and logged: a token says no name, so the admin is named by where it called from.
std::string who(const Caller& by) { return by.user.empty() ? "admin (" + by.peer + ")" : by.user; }
}  // namespace

void Daemon::open_tests() {
  std::vector<TestMute> api;
  if (TestHistory* h = history_->test_mutes()) {
    api = h->load_mutes();
    if (!h->error().empty()) spdlog::error("test mutes cannot be read back: {} (the API's mutes are lost until it can)", h->error());
    model_.tests = std::make_shared<TestHistoryQueries>(journal_file(state_dir_));
  }
  mutes_ = TestMutes(cfg_.tests.mute, std::move(api), cfg_.tests.max_muted);
  publish_mutes();
  // A step's tests are written off the engine thread: the metrics' flaky count is refreshed when they are.
  history_->set_on_tests_written([this] { boost::asio::post(io_, [this] { view_changed(); }); });
}

std::optional<TestMute> Daemon::muted(const std::string& test) const { return mutes_.match(test, utc_date()); }

void Daemon::publish_mutes() {
  model_.mutes = mutes_.all();
  model_.metrics.tests_muted = mutes_.in_force(utc_date());
  model_.tests_window_days = cfg_.tests.window_days;
}

void Daemon::reload_mutes(const TestsConfig& next) {
  mutes_ = TestMutes(next.mute, mutes_.api(), next.max_muted);
  publish_mutes();
  view_changed();
}

Answer Daemon::mute_test(const TestMute& m, const Caller& by) {
  TestMute mute = m;
  mute.by = who(by);
  mute.at = iso_now();
  TestMutes next = mutes_;
  if (std::string why = next.add(mute, utc_date()); !why.empty()) return Answer::error(Outcome::Conflict, why);
  TestHistory* h = history_->test_mutes();
  if (!h || !h->save_mutes(next.api()))
    return Answer::error(Outcome::Unavailable, "the mute cannot be kept: " + (h ? h->error() : std::string("no test history")));
  mutes_ = std::move(next);
  publish_mutes();
  spdlog::info("test '{}' muted until {} by {}: {}", mute.id, mute.until, who(by), mute.reason);
  return Answer{Outcome::Ok, {{"muted", mute.json()}, {"in_force", mutes_.in_force(utc_date())}, {"max_muted", mutes_.max_muted()}}};
}

Answer Daemon::unmute_test(const std::string& glob, const Caller& by) {
  TestMutes next = mutes_;
  if (!next.remove(glob)) {
    for (const TestMute& c : cfg_.tests.mute)
      if (c.id == glob) return Answer::error(Outcome::Conflict, "'" + glob + "' is muted in runner.yml: remove it there (and send SIGHUP)");
    return Answer::error(Outcome::NotFound, "no mute of '" + glob + "' made through the API");
  }
  TestHistory* h = history_->test_mutes();
  if (!h || !h->save_mutes(next.api()))
    return Answer::error(Outcome::Unavailable, "the mute cannot be removed: " + (h ? h->error() : std::string("no test history")));
  mutes_ = std::move(next);
  publish_mutes();
  spdlog::info("test '{}' unmuted by {}", glob, who(by));
  return Answer{Outcome::Ok, {{"unmuted", glob}, {"in_force", mutes_.in_force(utc_date())}}};
}

}  // namespace pto
