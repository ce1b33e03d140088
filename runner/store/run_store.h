#pragma once
// RunStore: a daemon's state dir, one daemon's at a time (docs/operators.md, "Where things are kept"). The one
// owner of what is kept there and of who writes it: the lock (store/state_dir_lock), the run history (journal,
// run folders, engine state, test history: store/run_history), every run's journal and observer
// (store/run_reporter), the mutes the API made (testcases/mute_book, kept in the test history), retention
// (store/retention), the source mirror and its worktrees (source/git_mirror, with runner.yml `source:`), and the
// threads that read and write there off the engine thread (util/worker_pools).
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/runner_config.h"
#include "testcases/mute_book.h"
#include "util/answer.h"
#include "util/worker_pools.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class PerfHistory;
class StepResults;

class GitMirror;
class Retention;
class RunHistory;
class RunReporter;
struct ReadModel;

class RunStore {
 public:
  /// Takes `state_dir` for this daemon (made when missing). Null with `why`; `theirs`: another daemon holds it.
  static std::unique_ptr<RunStore> take(const std::string& state_dir, std::string& why, bool& theirs);
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  /// What the store tells and asks its daemon.
  struct Hooks {
    std::function<void(const std::string& run, const std::string& why)> write_failed;  // a run's journal write failed
    std::function<const nlohmann::json*(const std::string& id)> request_of;            // an active run's request
    std::function<void()> changed;                                                      // refresh the view soon
    std::function<bool(const std::string& id)> in_use;  // run `id` is hosted or being made: retention spares it
    std::function<bool()> paused;                        // no hourly retention (the daemon is cancelling)
  };
  /// Opens what is kept (`rebuild`: a damaged journal moved aside, history rebuilt from the run folders),
  /// for `cfg` as the last reload leaves it (with `source:`, its mirror: made `state-dir/source.git` when
  /// runner.yml names none) and `model` (the history it lists, the mutes). "" or why not.
  std::string open(boost::asio::io_context& io, RunnerConfig& cfg, ReadModel& model, bool rebuild, bool learn_durations, Hooks hooks);

  /// Whether open() went through: the parts below exist only then.
  bool opened() const { return retention_ != nullptr; }
  RunHistory& history() { return *history_; }
  RunReporter& reporter() { return *reporter_; }
  /// The green results steps may be reused from (null when they cannot be kept: every step then runs).
  StepResults* results() { return results_.get(); }
  /// Perf steps' samples and verdicts (null when they cannot be kept: perf steps are then judged against nothing).
  PerfHistory* perf() { return perf_.get(); }
  Retention& retention() { return *retention_; }
  WorkerPools& pools() { return pools_; }
  GitMirror* mirror() { return mirror_.get(); }

  /// The mutes in force when a test fails (runner.yml's and the API's).
  std::optional<TestMute> muted(const std::string& test) const { return mutes_->muted(test); }
  /// An admin's mute or unmute (`who` names them), kept, then shown.
  Answer mute(const TestMute& m, const std::string& who);
  Answer unmute(const std::string& glob, const std::string& who);
  /// runner.yml's tests settings again (SIGHUP): its mutes, the window.
  void reconfigure(const TestsConfig& tests);
  /// Today's count (a mute that ended today is out of it).
  int mutes_in_force() const { return mutes_ ? mutes_->in_force() : 0; }

 private:
  RunStore(std::string state_dir, int lock_fd);
  void publish_mutes();

  std::string state_dir_;
  int lock_fd_;  // flock on <state-dir>/daemon.lock while this daemon runs
  WorkerPools pools_;
  std::unique_ptr<GitMirror> mirror_;
  std::unique_ptr<RunHistory> history_;
  std::unique_ptr<RunReporter> reporter_;
  std::unique_ptr<StepResults> results_;
  std::shared_ptr<PerfHistory> perf_;  // shared with the read model's queries
  std::unique_ptr<MuteBook> mutes_;
  std::unique_ptr<Retention> retention_;
  ReadModel* model_ = nullptr;
  const RunnerConfig* cfg_ = nullptr;
};

}  // namespace pto
