// The daemon's lease commands (HostCommands: request, heartbeat, end) and what a lease's end tells the host.
// The book and the desk are lease/; what ties a run's leases to its steps (each attempt's own token, its
// leases bounded by what its timeouts leave, max-cards-per-run) is the run's (hosting/hosted_run).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "daemon/daemon.h"
#include "supervise/wire.h"
#include "engine/failure_evidence.h"
#include "exec/cgroup_tree.h"
#include "lease/lease_state_json.h"
#include "util/iso_time.h"
#include "util/clock.h"

namespace fs = std::filesystem;

namespace pto {

void Daemon::hand_leases_to_supervisor() {
  SupervisedExecutor* sup = host_->supervised;
  if (!sup) return;
  // A granted lease's cards stay its command's when this daemon goes: their flocks are kept by the step
  // supervisor too, and its command's cgroup is made in the supervisor's tree, which outlives this daemon
  // (the next one's start clears the trees of dead daemons, never a live supervisor's).
  leases_->desk.set_on_granted([this, sup](const Lease& l) {
    if (host_->dispatcher) sup->keep_lease(l.id, lease_state_json(l), host_->dispatcher->lock_fds(l.cards));
  });
  // One given back by an earlier lease's client is handed on (CgroupTree::recycle): a freshly made cgroup was
  // the largest part of a grant's cost again once leases moved to the supervisor's tree (bench/README.md).
  leases_->book.set_cgroup_maker([sup, made = std::string()](const std::string&) mutable {
    CgroupTree& own = CgroupTree::instance();
    if (!own.available() || !sup->supervisor_pid()) return own.make_child();
    const std::string tree = fs::path(own.root()).parent_path().string() + "/pto-runner-" + std::to_string(sup->supervisor_pid());
    if (made != tree) {  // the supervisor makes it at its first step; either may be first
      ::mkdir(tree.c_str(), 0755);
      made = tree;
    }
    const std::string path = own.make_child(tree, "lease");
    return path.empty() ? own.make_child() : path;
  });
}

void Daemon::restore_leases(const std::set<std::string>& adopted) {
  SupervisedExecutor* sup = host_->supervised;
  if (!sup) return;
  for (auto& [id, held] : sup->take_held_leases()) {
    Lease l = lease_state_from_json(held.data);
    // Only a lease whose run goes on (or an operator's) is granted again; the others' commands are ended by
    // their runs' recovery, and their cards go back.
    const bool goes_on = !l.id.empty() && (l.request.run_id.empty() || adopted.count(l.request.run_id));
    if (!goes_on || !host_->dispatcher) {
      close_fds(held.lock_fds);
      sup->forget_lease(id);
      continue;
    }
    host_->dispatcher->adopt(l.cards, held.lock_fds, "lease " + l.id + ": " + l.request.label, l.request.run_id.empty() ? l.id : l.request.run_id);
    const double granted = epoch_from_iso(l.granted);
    leases_->desk.restore(std::move(l), granted >= 0 ? epoch_now() - granted : 0);
    spdlog::info("lease {} taken over from the last daemon: its command runs on", id);
  }
}

void Daemon::lease_ended(const Lease& l) {
  if (host_->supervised) host_->supervised->forget_lease(l.id);
  std::optional<FailureEvidence> failed;
  HostedRun* run = find_run(l.request.run_id);
  if (run && !run->engine().finished()) {
    if (const StepRecord::Failure* f = run->lease_ended(l)) failed = f->evidence;
  } else if (l.report.failed() && l.request.run_id.empty()) {
    // An operator's lease is its own "run": its card faults count as another run's for the cards' health.
    failed = classify_failure({l.report.exit_code, l.report.signal, false, false, l.cards}, cfg_.health, l.report.output);
    if (failed->cause == FailureCause::Card || failed->cause == FailureCause::Infra)
      for (int card : failed->cards) host_->broker().charge(card, l.id, failed->pattern.empty() ? failed->reason : failed->pattern);
    model_.metrics.failures_by_cause[to_string(failed->cause)]++;
  }
  const double end = epoch_now(), held = std::chrono::duration<double>(steady_now() - l.granted_at).count();
  for (int card : l.cards) {
    const bool charged = failed && std::count(failed->cards.begin(), failed->cards.end(), card);
    history_->card_event({card, "lease", end - held, end, "lease " + l.id + ": " + l.request.label, l.request.run_id,
                          l.request.step ? l.request.step->text() : "", failed ? "failed" : "ended",
                          failed ? to_string(failed->cause) + (charged ? " (charged to this card)" : "") + ": " + failed->reason : l.end_reason});
  }
}

void Daemon::request_lease(LeaseRequest request, const Caller& by, Reply reply) {
  // Accepted runs may still lease while the daemon drains; nothing else may.
  const std::string& run_id = by.lease_scope();
  HostedRun* run = run_id.empty() ? nullptr : find_run(run_id);
  if (run && run->engine().finished()) run = nullptr;
  if (!endpoints_ || stop_.cancelling() || (stop_.draining() && !run)) return reply(stop_.refusal());
  if (run)
    if (auto refused = run->admit_lease(request, by)) return reply(std::move(*refused));
  // Its client (and whoever it tells) reads its lease in the status it asks for next.
  leases_->desk.request(std::move(request), run_id, [this, reply = std::move(reply)](Answer a) {
    refresh_view();
    reply(std::move(a));
  });
}

Answer Daemon::heartbeat_lease(const std::string& id, const Caller& by) { return leases_->desk.heartbeat(id, by.lease_scope()); }

void Daemon::end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) {
  // Its client reads the freed card in the status it asks for next.
  leases_->desk.end(
      id, why, by.lease_scope(),
      [this, reply](Answer a) {
        refresh_view();
        reply(std::move(a));
      },
      report);
}

}  // namespace pto
