#pragma once
// RunJournal: where the engine writes down every transition of a run before anyone else hears of it (the
// daemon's run history, store/run_history, through store/run_reporter; nothing for a foreground `run`).
// A journal that missed a transition would replay a crashed run wrong, so the engine calls it from the one
// function every step transition goes through (RunEngine::transition), and for every job's end.
#include "engine/run_state.h"
#include "plan/plan.h"

namespace pto {

class RunJournal {
 public:
  virtual ~RunJournal() = default;
  /// The step (job, step) has just changed state; its record holds the new one.
  virtual void step_changed(const RunRecord& run, const Plan& plan, int job, int step) = 0;
  /// The job has just ended (its state, reason and outputs are final).
  virtual void job_finished(const RunRecord& run, const Plan& plan, int job) = 0;
  /// The run's own fields or a job's changed with no step's transition (a cancel, a job's time-out): kept for
  /// a daemon that takes the run over (nothing for journals that keep only transitions).
  virtual void run_changed(const RunRecord& run) { (void)run; }
  /// A step's record changed with no transition (a new attempt handed to an executor that places it): kept
  /// for a daemon that takes the run over; no event.
  virtual void step_updated(const RunRecord& run, int job, int step) { (void)run, (void)job, (void)step; }
  /// What was journaled is kept now (a journal may commit a burst of transitions together): the engine calls
  /// this before anything outside the daemon follows from them, a step's processes starting or being
  /// signalled.
  virtual void durable() {}
  /// The run's engine is going (its destructor): what the journal meant to read of `run` later (a head written
  /// at its group's commit) is read now.
  virtual void run_gone(const RunRecord& run) { (void)run; }
};

}  // namespace pto
