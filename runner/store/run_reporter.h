#pragma once
// RunReporter: what the daemon hears of every run it hosts, as the run's journal (each transition into the
// run history before anyone else hears of it: store/run_history) and as its observer (the metrics, the cards'
// history, learned durations, the toolchain's state, and a nudge to refresh the read model). One for all of
// the daemon's runs; a foreground `run` has the console instead (report/console).
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "read_model/host_view.h"

namespace pto {

class RunHistory;
struct Metrics;

class RunReporter : public RunObserver, public RunJournal {
 public:
  /// `request_of(id)`: the journaled request of active run `id` (null: none). `learn_durations`: successful
  /// steps' times teach the next plans (not when steps only sleep). `changed`: the read model should be
  /// refreshed soon.
  /// `main_ref`: runner.yml's main branch, read when asked (it outlives this; a reload changes it).
  RunReporter(RunHistory& history, Metrics& metrics, const std::string& main_ref, bool learn_durations,
              std::function<const nlohmann::json*(const std::string& id)> request_of, std::function<void()> changed);
  ~RunReporter() override;
  RunReporter(const RunReporter&) = delete;
  RunReporter& operator=(const RunReporter&) = delete;
  /// The pinned toolchain as the last lead job left it (the status shows it).
  const ToolchainStatus& toolchain() const { return toolchain_; }

  // RunJournal
  void step_changed(const RunRecord& r, const Plan& p, int job, int step) override;
  void job_finished(const RunRecord& r, const Plan& p, int job) override;
  void run_changed(const RunRecord& r) override;
  void step_updated(const RunRecord& r, int job, int step) override;
  void durable() override;
  void run_gone(const RunRecord& r) override;
  // RunObserver
  void on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState from) override;
  void on_job_finished(const RunRecord& r, const Plan& p, int job) override;
  void on_attempt_failed(const RunRecord& r, const Plan& p, int job, int step, const StepRecord::Failure& f, bool retried) override;
  void on_health_check(const RunRecord& r, int card, const std::string& command, double seconds, const std::string& failure) override;
  /// Told of every step that became final, after the journal and the metrics (the daemon's notifications).
  /// Each transition also keeps the engine's own state of the run (its steps held by a supervisor outlive this
  /// daemon; the next one takes the run over from it).
  void set_keep_engine_state(bool keep) { keep_engine_state_ = keep; }
  void set_on_step_final(std::function<void(const RunRecord&, const Plan&, int job, int step)> f) { step_final_ = std::move(f); }

 private:
  /// An attempt of a step stopped: one event on each card it held (the cards page).
  void card_events_of_attempt(const RunRecord& r, const Plan& p, int job, int step);
  void lead_job_ended(const RunRecord& r, const StepRecord& s);
  /// A step with `tests:` ended: its cases into the test history, their last results into the metrics.
  void tests_ended(const RunRecord& r, const Plan& p, int job, int step);
  /// A step with `tests:` failed having run none: counted by its run's branch.
  void ran_no_tests(const RunRecord& r);

  /// The heads of the runs whose steps changed in the open group, written by its commit (RunHistory's
  /// before-commit hook) or when the run's engine goes, whichever is first: the record outlives neither.
  void write_due_heads();
  std::map<std::string, const RunRecord*> heads_due_;
  RunHistory& history_;
  Metrics& metrics_;
  const std::string& main_ref_;
  ToolchainStatus toolchain_;
  bool learn_durations_;
  bool keep_engine_state_ = false;
  std::function<const nlohmann::json*(const std::string&)> request_of_;
  std::function<void()> changed_;
  std::function<void(const RunRecord&, const Plan&, int, int)> step_final_;
};

}  // namespace pto
