#pragma once
// ConsoleReporter: what `pto-runner run` prints while a run goes and when it ends.
//
// Plain lines: a start and an end line per step, and the step's output prefixed with `[job / step]` whenever
// more than one step can run at once (so interleaved output stays attributable). With GITHUB_ACTIONS=true,
// each finished step's log is printed inside ::group::/::endgroup:: (groups cannot interleave, so output is
// not streamed then) as inert text (report/actions_output), each failure gets an ::error title=...:: annotation, and a Markdown table of every job
// and step is appended to $GITHUB_STEP_SUMMARY.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "engine/engine.h"
#include "report/actions_output.h"

namespace pto {

struct ConsoleOptions {
  bool github = false;          // GITHUB_ACTIONS=true
  std::string step_summary;     // $GITHUB_STEP_SUMMARY
  bool stream_output = true;    // false for --simulate
  bool prefix_lines = true;
  /// A terminal: keep one live line per running step (elapsed time, cards) below the scrolling output.
  bool live = false;
  std::FILE* out = stdout;
};

class ConsoleReporter : public RunObserver {
 public:
  explicit ConsoleReporter(ConsoleOptions opts) : opts_(std::move(opts)), actions_(opts_.out, opts_.github) {}
  void on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState from) override;
  void on_step_output(const RunRecord& r, const Plan& p, int job, int step, std::string_view line) override;
  void on_job_finished(const RunRecord& r, const Plan& p, int job) override;
  void on_run_finished(const RunRecord& r, const Plan& p) override;

 private:
  void step_started(const RunRecord& r, const Plan& p, int job, int step);
  void step_finished(const RunRecord& r, const Plan& p, int job, int step);
  void clear_live();
  void draw_live(const RunRecord& r, const Plan& p);
  ConsoleOptions opts_;
  ActionsOutput actions_;
  int live_lines_ = 0;  // lines of the live block currently on screen
  std::map<std::pair<int, int>, std::chrono::steady_clock::time_point> started_;
};

/// The final table: job, step, state, duration, cards, exit.
std::string final_table(const RunRecord& r, const Plan& p);
std::string describe_exit(const StepRecord& s);

}  // namespace pto
