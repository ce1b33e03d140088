#include "report/console.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "config/device_spec.h"
#include "report/run_view.h"
#include "util/clock.h"

namespace pto {

namespace {

std::string duration_text(double seconds) { return format_duration(seconds); }

double step_seconds(const StepRecord& s) {
  return s.started_at >= 0 && s.finished_at >= 0 ? s.finished_at - s.started_at : -1;
}

}  // namespace

std::string describe_exit(const StepRecord& s) {
  if (!s.error.empty()) return s.error;
  if (s.timed_out) return "timed out";
  if (s.signal) return "signal " + std::to_string(s.signal);
  if (s.exit_code >= 0) return "exit " + std::to_string(s.exit_code);
  return "";
}

void ConsoleReporter::clear_live() {
  if (!opts_.live || live_lines_ == 0) return;
  std::fprintf(opts_.out, "\x1b[%dA\x1b[J", live_lines_);  // up over the block, clear to the end of the screen
  live_lines_ = 0;
}

void ConsoleReporter::draw_live(const RunRecord& r, const Plan& p) {
  if (!opts_.live) return;
  const auto now = steady_now();
  int shown = 0;
  for (std::size_t j = 0; j < p.jobs.size(); ++j)
    for (std::size_t k = 0; k < p.jobs[j].steps.size(); ++k) {
      const StepRecord& s = r.jobs[j].steps[k];
      if (s.state != StepState::Running) continue;
      if (shown == 20) {
        std::fprintf(opts_.out, "\x1b[2m  ... more running\x1b[0m\n");
        ++shown;
        continue;
      }
      if (shown > 20) continue;
      std::string cards = s.cards.empty() ? "" : "  [cards " + join_ids(s.cards) + "]";
      auto it = started_.find({static_cast<int>(j), static_cast<int>(k)});
      double elapsed = it == started_.end() ? 0 : std::chrono::duration<double>(now - it->second).count();
      std::fprintf(opts_.out, "\x1b[2m  running %5.0fs  %s%s\x1b[0m\n", elapsed,
                   step_label(p.jobs[j], p.jobs[j].steps[k]).c_str(), cards.c_str());
      ++shown;
    }
  live_lines_ = shown;
  std::fflush(opts_.out);
}

void ConsoleReporter::on_step_changed(const RunRecord& r, const Plan& p, int job, int step, StepState) {
  const StepState now = r.jobs[job].steps[step].state;
  if (now == StepState::Running) step_started(r, p, job, step);
  else if (is_final(now)) step_finished(r, p, job, step);
}

void ConsoleReporter::step_started(const RunRecord& r, const Plan& p, int job, int step) {
  started_[{job, step}] = steady_now();
  if (opts_.github) return;
  clear_live();
  const StepRecord& s = r.jobs[job].steps[step];
  std::fprintf(opts_.out, "==> %s", step_label(p.jobs[job], p.jobs[job].steps[step]).c_str());
  if (!s.cards.empty()) std::fprintf(opts_.out, "  [cards %s]", join_ids(s.cards).c_str());
  if (s.attempt > 1) std::fprintf(opts_.out, "  (attempt %d)", s.attempt);
  std::fprintf(opts_.out, "\n");
  draw_live(r, p);
  std::fflush(opts_.out);
}

void ConsoleReporter::on_step_output(const RunRecord& r, const Plan& p, int job, int step, std::string_view line) {
  if (opts_.github || !opts_.stream_output) return;
  clear_live();
  if (opts_.prefix_lines)
    std::fprintf(opts_.out, "[%s] ", step_label(p.jobs[job], p.jobs[job].steps[step]).c_str());
  std::fwrite(line.data(), 1, line.size(), opts_.out);
  std::fputc('\n', opts_.out);
  draw_live(r, p);
}

void ConsoleReporter::step_finished(const RunRecord& r, const Plan& p, int job, int step) {
  const StepRecord& s = r.jobs[job].steps[step];
  const std::string title = step_label(p.jobs[job], p.jobs[job].steps[step]);
  if (opts_.github) {
    if (s.state == StepState::Skipped || s.state == StepState::Deduplicated || s.state == StepState::Cancelled) return;
    actions_.group(title + " (" + to_string(s.state) + ", " + duration_text(step_seconds(s)) + ")");
    {
      // The log as it is, every byte inert: a step must not inject workflow commands.
      ActionsOutput::Block block(actions_);
      std::ifstream log(s.log_path, std::ios::binary);
      char buf[64 * 1024];
      while (log.read(buf, sizeof(buf)) || log.gcount() > 0) block.write({buf, static_cast<std::size_t>(log.gcount())});
    }
    actions_.endgroup();
    if (s.state == StepState::Failed || s.state == StepState::TimedOut)
      actions_.command("error", {{"title", title + " failed"}}, describe_exit(s) + "; log: " + s.log_path);
    std::fflush(opts_.out);
    return;
  }
  clear_live();
  if (s.state == StepState::Deduplicated) {
    const auto& from = p.jobs[job].steps[*p.jobs[job].steps[step].deduplicated_from];
    std::fprintf(opts_.out, "--- %s: deduplicated (same work as '%s'), not run\n", title.c_str(), from.name.c_str());
  } else if (s.state == StepState::Skipped || (s.state == StepState::Cancelled && s.attempt == 0)) {
    std::fprintf(opts_.out, "--- %s: %s\n", title.c_str(), to_string(s.state).c_str());
  } else {
    std::string detail = describe_exit(s);
    std::fprintf(opts_.out, "<== %s: %s in %s%s%s\n", title.c_str(), to_string(s.state).c_str(),
                 duration_text(step_seconds(s)).c_str(), detail.empty() ? "" : " (", detail.empty() ? "" : (detail + ")").c_str());
    if (s.state == StepState::Failed || s.state == StepState::TimedOut)
      std::fprintf(opts_.out, "    log: %s\n", s.log_path.c_str());
  }
  draw_live(r, p);
  std::fflush(opts_.out);
}

void ConsoleReporter::on_job_finished(const RunRecord& r, const Plan& p, int job) {
  const JobRecord& j = r.jobs[job];
  if (opts_.github) return;
  if (j.state == JobState::Skipped || j.state == JobState::Cancelled) {
    clear_live();
    std::fprintf(opts_.out, "--- job %s: %s (%s)\n", p.jobs[job].id.c_str(), to_string(j.state).c_str(), j.reason.c_str());
    draw_live(r, p);
  }
  std::fflush(opts_.out);
}

void ConsoleReporter::on_run_finished(const RunRecord& r, const Plan& p) {
  clear_live();
  // Step and job names come from the definitions under test: inert text inside Actions too.
  std::string text = "\n" + final_table(r, p);
  for (const auto& problem : r.infrastructure_problems) text += "infrastructure: " + problem + "\n";
  actions_.text(text);
  if (opts_.github) {
    for (const auto& problem : r.infrastructure_problems)
      actions_.command("error", {{"title", "pto-runner infrastructure"}}, problem);
    if (!opts_.step_summary.empty()) std::ofstream(opts_.step_summary, std::ios::app) << markdown_summary(run_to_json(r, p, "", -1, 0));
  }
  std::fflush(opts_.out);
}

std::string final_table(const RunRecord& r, const Plan& p) {
  std::vector<std::vector<std::string>> rows = {{"JOB", "STEP", "STATE", "DURATION", "CARDS", "EXIT"}};
  for (std::size_t j = 0; j < p.jobs.size(); ++j)
    for (std::size_t s = 0; s < p.jobs[j].steps.size(); ++s) {
      const StepRecord& sr = r.jobs[j].steps[s];
      std::string state = to_string(sr.state);
      if (sr.attempt > 1) state += " (" + std::to_string(sr.attempt) + " attempts)";
      rows.push_back({p.jobs[j].id, p.jobs[j].steps[s].name, state, duration_text(step_seconds(sr)),
                      sr.cards.empty() ? "-" : join_ids(sr.cards), describe_exit(sr).empty() ? "-" : describe_exit(sr)});
    }
  std::vector<std::size_t> width(6, 0);
  for (auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (row[c].size() > 60) row[c] = row[c].substr(0, 57) + "...";
      width[c] = std::max(width[c], row[c].size());
    }
  std::ostringstream os;
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      os << row[c];
      if (c + 1 < row.size()) os << std::string(width[c] - row[c].size() + 2, ' ');
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace pto
