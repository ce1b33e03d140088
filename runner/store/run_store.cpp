#include "store/run_store.h"

#include <unistd.h>

#include <filesystem>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "read_model/read_model.h"
#include "source/git_mirror.h"
#include "store/case_history.h"
#include "store/case_history_queries.h"
#include "store/step_results.h"
#include "store/retention.h"
#include "store/perf_history.h"
#include "store/run_history.h"
#include "store/run_reporter.h"
#include "store/state_dir_lock.h"
#include "util/state_paths.h"

namespace fs = std::filesystem;

namespace pto {

std::unique_ptr<RunStore> RunStore::take(const std::string& state_dir, std::string& why, bool& theirs) {
  theirs = false;
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) {
    why = "cannot create the state dir " + state_dir + ": " + ec.message();
    return nullptr;
  }
  // One daemon per state dir: a second one would "recover" the first one's live runs and kill their steps.
  std::string holder, lock_error;
  const int fd = lock_state_dir(state_dir, holder, lock_error);
  if (fd < 0) {
    theirs = lock_error.empty();
    why = !lock_error.empty() ? lock_error
                              : "the state dir " + state_dir + " belongs to another pto-runner serve (pid " + holder + ", lock " + state_dir +
                                    "/daemon.lock); stop it, or give this one another --state-dir";
    return nullptr;
  }
  return std::unique_ptr<RunStore>(new RunStore(state_dir, fd));
}

RunStore::RunStore(std::string state_dir, int lock_fd) : state_dir_(std::move(state_dir)), lock_fd_(lock_fd) {}

RunStore::~RunStore() {
  pools_.join();  // what they run reads and writes the history and the mirror
  retention_.reset();
  reporter_.reset();
  mutes_.reset();
  history_.reset();
  ::close(lock_fd_);
}

std::string RunStore::open(boost::asio::io_context& io, RunnerConfig& cfg, ReadModel& model, bool rebuild, bool learn_durations,
                           Hooks hooks) {
  model_ = &model;
  cfg_ = &cfg;
  if (cfg.source.configured()) {
    if (cfg.source.mirror.empty()) cfg.source.mirror = state_dir_ + "/source.git";  // paths were resolved with the host dirs
    mirror_ = std::make_unique<GitMirror>(cfg.source);
  }
  history_ = std::make_unique<RunHistory>(state_dir_, model, pools_.git, mirror_.get(), hooks.write_failed);
  if (std::string e = history_->open(rebuild); !e.empty()) return e;
  history_->batch_card_events(io);
  history_->group_commits(io);

  // The API's mutes are kept in the test history, so a restart keeps them.
  std::vector<TestMute> kept;
  TestHistory* h = history_->test_mutes();
  if (h) {
    kept = h->load_mutes();
    if (!h->error().empty()) spdlog::error("test mutes cannot be read back: {} (the API's mutes are lost until it can)", h->error());
    model.tests = std::make_shared<TestHistoryQueries>(journal_file(state_dir_));
  }
  mutes_ = std::make_unique<MuteBook>(cfg.tests, std::move(kept), [h](const std::vector<TestMute>& api) {
    if (!h) return std::string("no test history");
    if (h->save_mutes(api)) return std::string();
    return h->error().empty() ? std::string("the test history refused the write") : h->error();
  });
  publish_mutes();
  // A step's tests are written off the engine thread: the metrics' flaky count is refreshed when they are.
  history_->set_on_tests_written([&io, changed = hooks.changed] { boost::asio::post(io, changed); });

  std::string results_error;
  results_ = StepResults::open(journal_file(state_dir_), results_error);
  if (!results_) spdlog::error("results cannot be reused: {}", results_error);
  std::string perf_error;
  perf_ = PerfHistory::open(journal_file(state_dir_), perf_error);
  if (!perf_) spdlog::error("perf history cannot be kept: {}", perf_error);
  model.perf = perf_;
  reporter_ = std::make_unique<RunReporter>(*history_, model.metrics, cfg.main_ref, learn_durations, hooks.request_of, hooks.changed);
  retention_ = std::make_unique<Retention>(io, *history_, cfg, hooks.in_use, hooks.paused, hooks.changed, pools_.reads, model.metrics, results_.get(), perf_.get());
  return "";
}

void RunStore::publish_mutes() {
  model_->mutes = mutes_->all();
  model_->metrics.tests_muted = mutes_->in_force();
  model_->tests_window_days = cfg_->tests.window_days;
}

Answer RunStore::mute(const TestMute& m, const std::string& who) {
  Answer a = mutes_->mute(m, who);
  if (a.outcome == Outcome::Ok) publish_mutes();
  return a;
}

Answer RunStore::unmute(const std::string& glob, const std::string& who) {
  Answer a = mutes_->unmute(glob, who);
  if (a.outcome == Outcome::Ok) publish_mutes();
  return a;
}

void RunStore::reconfigure(const TestsConfig& tests) {
  mutes_->reconfigure(tests);
  publish_mutes();
}

}  // namespace pto
