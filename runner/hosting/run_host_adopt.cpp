// Taking over at start the runs an earlier daemon left (SPEC "Nothing lost when the daemon stops"). A run is
// taken over when its steps' supervisor still keeps what it was handed (HostedRun::handover: its environment
// and secrets, never on disk) and the journal kept its engine state (store/engine_state_journal): it is
// planned again from its request and its own worktree, given its sandbox user again, and its engine goes on
// from that state, its running steps found again in the supervisor by their markers (their cards' flocks
// handed back), its waiting steps queued again. Every other unfinished run is marked interrupted as before
// (RunHistory::recover), and what the supervisor held of it is stopped.
//
// Not taken over (interrupted, as before): a run that had not begun (it waited for a sandbox user), an
// attached run (its clients' wanted jobs are not journaled), and a bisection's probes and control runs (the
// bisection and the control run them again).
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "hosting/run_host.h"

#include "host/host.h"
#include "hosting/host_leases.h"
#include "util/worker_pools.h"
#include "store/run_history.h"
#include "supervise/wire.h"
#include "engine/run_state_json.h"
#include "slurm/slurm_command.h"
#include "util/secret_mask.h"
#include "util/state_paths.h"

namespace pto {

bool RunHost::adoptable(const nlohmann::json& request) {
  return !request.contains("probe") && !request.contains("attach");
}

std::set<std::string> RunHost::adopt() {
  std::set<std::string> adopted;
  SupervisedExecutor* sup = parts_.host.supervised;
  if (!sup) return adopted;
  std::set<std::string> slurm_jobs;  // Slurm jobs of the steps taken over (their names)
  const nlohmann::json& kept = sup->kept_runs();
  std::set<std::string> unfinished;
  for (const auto& run : parts_.history.journal().unfinished_runs()) {
    const std::string id = run.value("id", "");
    unfinished.insert(id);
    if (!kept.contains(id)) continue;
    if (std::string why = adopt_run(run, kept[id], slurm_jobs); !why.empty()) {
      spdlog::warn("run {} cannot be taken over ({}): it is marked interrupted", id, why);
      sup->forget_run(id);
      continue;
    }
    adopted.insert(id);
    spdlog::info("run {} taken over from the last daemon: its steps ran on", id);
  }
  // What the supervisor keeps of runs that are over (a forget it never heard) goes: its secrets among it.
  for (const auto& [id, data] : kept.items())
    if (!unfinished.count(id)) sup->forget_run(id);
  // Under Slurm: what the last daemon left in Slurm and nobody took over is cancelled (as without supervisors).
  parts_.host.cancel_slurm_leftovers(slurm_jobs);
  leases_.restore(adopted);  // the leases of the runs that go on (and operators'), their cards held again
  return adopted;
}

std::string RunHost::adopt_run(const nlohmann::json& journaled, const nlohmann::json& kept, std::set<std::string>& slurm_jobs) {
  const std::string id = journaled.value("id", "");
  const nlohmann::json request = journaled.value("request", nlohmann::json::object());
  if (!adoptable(request)) return "a probe or an attached run";
  std::optional<nlohmann::json> saved = parts_.history.engine_state(id);
  if (!saved) return "no engine state was kept";

  EngineOptions eo = engine_options();
  eo.run_id = id;
  eo.run_dir = run_dir(parts_.cfg.state_dir, id);
  Diagnostics diags;
  Project project;
  if (request.contains("source")) {
    // Its own commit's definitions, from its own worktree (host settings from this daemon).
    eo.root = request["source"].value("worktree", "");
    LoadOptions lo;
    lo.root = eo.root;
    lo.host = parts_.cfg;
    project = load_project(lo, diags);
  } else {
    project = load_project(defaults_.load, diags);
  }
  RunSubmission s;
  s.jobs = request.value("jobs", std::vector<std::string>{});
  std::string missing;
  Plan plan = plan_of(project, s, diags, missing);
  if (diags.has_input_errors()) return "its definitions do not plan any more";

  eo.base_env = kept.value("base_env", std::map<std::string, std::string>{});
  eo.mask = std::make_shared<SecretMask>();
  eo.mask->add_values(kept.value("mask", std::vector<std::string>{}));
  lend_to_engine(eo, request.value("ref", ""));
  const std::string run_token = eo.base_env.count("PTO_RUNNER_LEASE_TOKEN") ? eo.base_env["PTO_RUNNER_LEASE_TOKEN"] : "";

  // It goes on reusing and keeping results as it began, with the inputs' trees read at its start.
  const bool reuses = request.value("reuse", true) && !request.value("sha", std::string()).empty() && !request.contains("control");
  if (reuses && parts_.mirror && parts_.results) eo.reuse = reuse_hooks(eo.caches->scope());
  eo.perf = perf_hooks(request.value("ref", std::string()), request.value("sha", std::string()));
  auto run = make(std::move(plan), std::move(eo), request, run_token);
  HostedRun& r = *run;
  if (reuses) r.engine().set_input_trees(kept.value("input_trees", std::map<std::string, std::string>{}));
  auto reattach = [this, &r, &slurm_jobs](const StepId& step, const std::string& marker, const std::vector<int>& cards,
                             std::function<void(const StepOutcome&)> done) -> HostedRun::Reattached {
    const PlanJob& pj = r.engine().plan().jobs[step.job];
    const StepRecord& sr = r.engine().record().jobs[step.job].steps[step.step];
    StepLaunch what;
    what.marker = marker;
    what.label = step_label(pj, pj.steps[step.step]);
    what.log_path = sr.log_path;
    what.grace_seconds = parts_.cfg.kill_grace_seconds;
    what.devices = pj.steps[step.step].devices;
    HeldStep held;
    const bool ended = !done;  // its reports were being read: nothing holds it, its cards are held afresh
    const std::uint64_t handle = ended ? 0 : parts_.host.adopt_step(what, {sr.node, cards, sr.executor_job}, r.engine().shared_mask(), std::move(done), held);
    if (!handle && !ended) return {};
    // Its cards are held again: a running step's on the flocks its supervisor kept, an ended one's locked
    // afresh (its supervisor let them go), so nothing else gets them before its end gives them back. (Under
    // Slurm, Slurm holds them.)
    if (!cards.empty() && parts_.host.dispatcher && !parts_.host.cluster_picks_cards()) parts_.host.dispatcher->adopt(cards, held.lock_fds, what.label, r.id());
    else
      close_fds(held.lock_fds);
    if (!sr.executor_job.empty()) slurm_jobs.insert(job_name_of(marker));
    return {handle, held.lease_token};
  };
  RunRecord state = run_state_from_json(*saved);
  // Its jobs' $GITHUB_ENV values were never written to disk: the supervisor kept them with the handover.
  const nlohmann::json file_env = kept.value("file_env", nlohmann::json::array());
  for (std::size_t j = 0; j < state.jobs.size() && j < file_env.size(); ++j)
    if (file_env[j].is_object()) state.jobs[j].file_env = file_env[j].get<std::map<std::string, std::string>>();
  if (std::string why = r.adopt(std::move(state), kept.value("user", ""), reattach); !why.empty()) return why;
  keep_handover(r);  // what it had is still kept; from here on it follows what its steps add
  keep(std::move(run));
  return "";
}

}  // namespace pto
