// A run taken over from an earlier daemon (SPEC "Nothing lost when the daemon stops"): its state as the
// journal kept it at its last transition, its running steps found again by their markers (their supervisor
// held them meanwhile), its waiting steps queued again in their old order, its timers carried on.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/engine.h"
#include "exec/process_marker.h"
#include "util/clock.h"
#include "util/iso_time.h"
#include "util/state_paths.h"

namespace fs = std::filesystem;

namespace pto {

std::string RunEngine::adopt(RunRecord saved, const Reattach& reattach) {
  if (saved.jobs.size() != plan_.jobs.size())
    return "its saved state has " + std::to_string(saved.jobs.size()) + " job(s), its plan now " + std::to_string(plan_.jobs.size());
  for (std::size_t j = 0; j < plan_.jobs.size(); ++j) {
    auto& steps = saved.jobs[j].steps;
    if (steps.size() > plan_.jobs[j].steps.size())
      return "job " + plan_.jobs[j].id + " had " + std::to_string(steps.size()) + " step(s), its plan now " +
             std::to_string(plan_.jobs[j].steps.size());
    steps.resize(plan_.jobs[j].steps.size());  // steps never journaled have not changed: pending
    for (auto& s : steps)
      if (s.created.empty()) s.created = saved.created;
  }
  run_ = std::move(saved);
  recount();
  started_ = true;
  // Health checks' markers count from a number of this start's own: a check the last daemon left running is
  // still held by the supervisor (until it is stopped), and a new one must never carry its marker.
  health_check_count_ = static_cast<int>(std::fmod(epoch_now(), 1e6)) * 1000;
  // Its times count from its start: the engine clock goes on where the last daemon's was.
  const double created = epoch_from_iso(run_.created);
  t0_ = clock_.now() - (created >= 0 ? std::max(0.0, epoch_now() - created) : 0);
  fs::create_directories(run_logs(opts_.run_dir));
  fs::create_directories(run_files(opts_.run_dir));
  std::vector<std::pair<std::size_t, std::size_t>> requeue;
  for (std::size_t j = 0; j < run_.jobs.size(); ++j) {
    JobRecord& jr = run_.jobs[j];
    if (jr.state != JobState::Running) continue;
    flow_.resolve_job(j);
    const PlanJob& pj = plan_.jobs[j];
    if (pj.timeout_minutes && !opts_.simulate) {
      const double left = std::max(0.001, *pj.timeout_minutes * 60 - (now() - jr.started_at));
      job_timeouts_[j] = clock_.after(left, [this, j] {
        if (is_final(run_.jobs[j].state)) return;
        run_.jobs[j].timed_out = true;
        run_.jobs[j].failed = true;
        cancel_job(j, "job timeout-minutes reached");
        pump();
      });
    }
    for (std::size_t s = 0; s < jr.steps.size(); ++s) {
      StepRecord& sr = jr.steps[s];
      sr.handle = 0;
      sr.ticket = 0;
      sr.held = 0;  // its CPUs and memory are not counted again (the broker that granted them is gone)
      if (sr.state == StepState::Pending) continue;
      flow_.resolve_step(j, s);  // its text as it ran (a retry runs it again)
      if (sr.state == StepState::Waiting) requeue.emplace_back(j, s);
      if (sr.state != StepState::Running) continue;
      const std::string marker = ProcessMarker::for_step(run_.id, j, s, sr.attempt).text();
      if (sr.ended) {
        // It had ended and its reports were being read: its cards are held again (nothing of it holds them
        // now, and judging it gives them back), then the reports are read again.
        reattach(j, s, marker, sr.cards, nullptr);
        boost::asio::post(io_, [this, j, s, o = *sr.ended] { judge_attempt_end(j, s, o); });
        continue;
      }
      sr.handle = reattach(j, s, marker, sr.cards, [this, j, s](const StepOutcome& o) { on_done(j, s, o); });
      if (!sr.handle)
        boost::asio::post(io_, [this, j, s] {
          StepOutcome o;
          o.error = "its processes were lost while no daemon ran (its supervisor did not hold it)";
          on_done(j, s, o);
        });
    }
  }
  // Queued again in their old order (each keeps its place number, as a retry does).
  boost::asio::post(io_, [this, requeue] {
    for (const auto& [j, s] : requeue)
      if (run_.jobs[j].steps[s].state == StepState::Waiting) enqueue(j, s);
    pump();
  });
  return "";
}

}  // namespace pto
