// The daemon's part in test results (docs/maintainers.md, "Test results"): its MuteBook (testcases/mute_book)
// kept in the test history, so a restart keeps the API's mutes, and what the read model shows of them. Recording each step's tests is the reporter's
// (store/run_reporter); the queries are store/case_history_queries.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "daemon/daemon.h"
#include "store/run_history.h"
#include "store/case_history_queries.h"
#include "util/state_paths.h"

namespace pto {

namespace {
// Who made a mute, as it is kept and logged: a token says no name, so the admin is named by where it called from.
std::string who(const Caller& by) { return by.user.empty() ? "admin (" + by.peer + ")" : by.user; }
}  // namespace

void Daemon::open_tests() {
  std::vector<TestMute> kept;
  TestHistory* h = history_->test_mutes();
  if (h) {
    kept = h->load_mutes();
    if (!h->error().empty()) spdlog::error("test mutes cannot be read back: {} (the API's mutes are lost until it can)", h->error());
    model_.tests = std::make_shared<TestHistoryQueries>(journal_file(state_dir()));
  }
  mutes_ = std::make_unique<MuteBook>(cfg_.tests, std::move(kept), [h](const std::vector<TestMute>& api) {
    if (!h) return std::string("no test history");
    if (h->save_mutes(api)) return std::string();
    return h->error().empty() ? std::string("the test history refused the write") : h->error();
  });
  publish_mutes();
  // A step's tests are written off the engine thread: the metrics' flaky count is refreshed when they are.
  history_->set_on_tests_written([this] { boost::asio::post(io_, [this] { view_changed(); }); });
}

void Daemon::publish_mutes() {
  model_.mutes = mutes_->all();
  model_.metrics.tests_muted = mutes_->in_force();
  model_.tests_window_days = cfg_.tests.window_days;
}

Answer Daemon::mute_test(const TestMute& m, const Caller& by) {
  Answer a = mutes_->mute(m, who(by));
  if (a.outcome == Outcome::Ok) publish_mutes();
  return a;
}

Answer Daemon::unmute_test(const std::string& glob, const Caller& by) {
  Answer a = mutes_->unmute(glob, who(by));
  if (a.outcome == Outcome::Ok) publish_mutes();
  return a;
}

}  // namespace pto
