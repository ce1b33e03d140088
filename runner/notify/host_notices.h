#pragma once
// HostNotices: what happens on a daemon's host, told to runner.yml's receivers (SPEC "On-call hears it first";
// docs/operators.md, "Notifications"). The daemon hands it the host's events as they happen, on the engine
// thread; each becomes a NotifyEvent, which the Notifier (notify/notifier) keeps in the outbox for every
// receiver that wants it and delivers on its own threads. Events:
//   card-bad, card-retired, card-returned   the pool's health changes
//   main-red                                a step of a run of runner.yml main-branch failed (grouped by run)
//   ran-no-tests                            a step with tests: ran none (grouped by run)
//   new-flaky-test                          a test flaky in this run and not on this ref before, in the window
//   queue-stuck                             the queue's oldest entry waited notify.queue-stuck-minutes
//   bisect-done                             a bisection ended
// Text from a run (failed tests' messages, verdicts) is masked with the run's secrets before it is kept.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "engine/run_state.h"
#include "plan/plan.h"
#include "read_model/host_view.h"
#include "read_model/receiver_status.h"
#include "sched/device_pool.h"  // CardHealth

namespace pto {

class Bisection;
class Notifier;
class SecretMask;

/// A run as the notices need to know it: its ref and sha, and the masks of its secrets.
struct NoticedRun {
  std::string ref, sha;
  const SecretMask* mask = nullptr;
};

class HostNotices {
 public:
  /// `journal`: the journal's file (the outbox's table and the test history live there); `base_url`: what
  /// links in messages start with (the daemon's address, once it listens); `changed`: called on a sender's
  /// thread when what status() says changed.
  HostNotices(std::string journal, std::function<std::string()> base_url, std::function<void()> changed);
  ~HostNotices();

  /// Starts the senders for cfg's receivers (none: nothing to do). Says in the log what it does.
  void open(const RunnerConfig& cfg);
  void card(int card, CardHealth from, CardHealth to, const std::string& why);
  /// A step of `run` reached its final state.
  void step_final(const RunRecord& r, const Plan& p, int job, int step, const NoticedRun& run);
  /// At each refresh of the read model: `queue-stuck` once the oldest entry has waited queue-stuck-minutes,
  /// again only after the queue moved.
  void queue(const HostView& v);
  void bisection_done(const Bisection& b);
  /// SIGHUP: `next`'s receivers, thresholds and grouping; what changed is said through `say`.
  void reload(const RunnerConfig& next, const std::function<void(const std::string&)>& say);
  std::vector<ReceiverStatus> status() const;

 private:
  std::string journal_;
  std::function<std::string()> base_url_;
  std::function<void()> changed_;
  NotifyConfig cfg_;
  std::string main_ref_;
  double window_days_ = 14;
  std::unique_ptr<Notifier> notifier_;  // with receivers (else null)
  bool queue_stuck_told_ = false;
};

}  // namespace pto
