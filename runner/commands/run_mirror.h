#pragma once
// RunMirror: a run as the client that follows it (`submit --wait`) knows it. The first answer is the whole run;
// each later GET asks only for what changed since the revision the last answer gave (`?since=`,
// server/run_changes), and the changes are merged in here, so a poll costs the daemon and the client what
// changed, not every step of the run. An answer that is not a delta (the run ended, or a restarted daemon took
// it over) replaces the mirror whole.
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

class RunMirror {
 public:
  /// What to add to the run's path for the next GET: "" (the whole run) or "?since=REVISION".
  std::string query() const;
  /// Takes an answer to that GET; false (nothing changed here) when it is not a run, or a delta that does not
  /// fit what is known (the next GET then asks for the whole run).
  bool take(nlohmann::json answer);
  /// The run as known now. Only steps that changed carry fresh times: a step's wait and duration count at
  /// its last change, its `queue` entry only while the last answer carried it.
  const nlohmann::json& run() const { return run_; }
  nlohmann::json& run() { return run_; }
  /// Whether run() has deltas merged into it (a caller that needs every field current asks for the whole run).
  bool merged() const { return merged_; }
  using StepPlace = std::pair<std::size_t, std::size_t>;  // (job, step) indexes in run()
  /// The steps the last answer carried when it was a delta; null after a whole answer (any step may have
  /// changed). A follower reads those, not every step of the run again.
  const std::set<StepPlace>* changed() const { return merged_ ? &changed_ : nullptr; }
  /// The steps whose `queue` entry came with the last answer.
  const std::set<StepPlace>& queued() const { return with_queue_; }

 private:
  bool merge(nlohmann::json& delta);  // moves what it takes out of `delta`
  nlohmann::json run_;
  std::string revision_;
  bool merged_ = false;
  std::set<StepPlace> with_queue_;  // steps whose `queue` came with the last answer
  std::set<StepPlace> changed_;     // steps the last delta carried
};

}  // namespace pto
