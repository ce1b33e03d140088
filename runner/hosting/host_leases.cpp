// HostLeases (hosting/host_leases.h): a daemon's lease commands (request, heartbeat, end), what a lease's end
// tells the host, and its leases across a restart. The book and the desk are lease/; what ties a run's leases to
// its steps (each attempt's own token, its leases bounded by what its timeouts leave, max-cards-per-run) is the
// run's (hosting/hosted_run).
#include "hosting/host_leases.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "engine/failure_evidence.h"
#include "exec/cgroup_tree.h"
#include "hosting/shutdown.h"
#include "lease/lease_state_json.h"
#include "read_model/counters.h"
#include "store/run_history.h"
#include "supervise/wire.h"
#include "util/clock.h"
#include "util/iso_time.h"

namespace fs = std::filesystem;

namespace pto {

HostLeases::HostLeases(Parts parts, FindRun find_run, std::function<void()> refresh, std::function<void()> changed)
    // A lease's client heartbeats every second; five missed and it is gone (killed, lost): its cards come back.
    : book(parts.io, parts.host.broker(), 5, parts.cfg.kill_grace_seconds),
      desk(book, parts.host),
      parts_(parts),
      find_run_(std::move(find_run)),
      refresh_(std::move(refresh)) {
  // A run's user may open its leased cards' files while it holds them (as its steps' own: exec/card_access).
  desk.set_card_access([this](const Lease& l, bool granted) {
    if (HostedRun* run = find_run_(l.request.run_id)) run->lease_card_access(l, granted);
  });
  desk.set_on_ended([this](const Lease& l) { ended(l); });
  book.set_on_change([this, changed = std::move(changed)] {
    changed();
    if (parts_.stop.stopping()) boost::asio::post(parts_.io, [this] { parts_.stop.check(); });
  });
  book.set_on_ended([this](const std::string& how, double held) { parts_.metrics.lease_seconds.observe(how, held); });
  hand_to_supervisor();
}

void HostLeases::hand_to_supervisor() {
  SupervisedExecutor* sup = parts_.host.supervised;
  if (!sup) return;
  // A granted lease's cards stay its command's when this daemon goes: their flocks are kept by the step
  // supervisor too, and its command's cgroup is made in the supervisor's tree, which outlives this daemon
  // (the next one's start clears the trees of dead daemons, never a live supervisor's).
  desk.set_on_granted([this, sup](const Lease& l) {
    if (parts_.host.dispatcher) sup->keep_lease(l.id, lease_state_json(l), parts_.host.dispatcher->lock_fds(l.cards));
  });
  // One given back by an earlier lease's client is handed on (CgroupTree::recycle): a freshly made cgroup was
  // the largest part of a grant's cost again once leases moved to the supervisor's tree (bench/README.md).
  book.set_cgroup_maker([sup, made = std::string()](const std::string&) mutable {
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

void HostLeases::restore(const std::set<std::string>& adopted) {
  SupervisedExecutor* sup = parts_.host.supervised;
  if (!sup) return;
  for (auto& [id, held] : sup->take_held_leases()) {
    Lease l = lease_state_from_json(held.data);
    // Only a lease whose run goes on (or an operator's) is granted again; the others' commands are ended by
    // their runs' recovery, and their cards go back.
    const bool goes_on = !l.id.empty() && (l.request.run_id.empty() || adopted.count(l.request.run_id));
    if (!goes_on || !parts_.host.dispatcher) {
      close_fds(held.lock_fds);
      sup->forget_lease(id);
      continue;
    }
    parts_.host.dispatcher->adopt(l.cards, held.lock_fds, "lease " + l.id + ": " + l.request.label, l.request.run_id.empty() ? l.id : l.request.run_id);
    const double granted = epoch_from_iso(l.granted);
    desk.restore(std::move(l), granted >= 0 ? epoch_now() - granted : 0);
    spdlog::info("lease {} taken over from the last daemon: its command runs on", id);
  }
}

void HostLeases::ended(const Lease& l) {
  if (parts_.host.supervised) parts_.host.supervised->forget_lease(l.id);
  std::optional<FailureEvidence> failed;
  HostedRun* run = find_run_(l.request.run_id);
  if (run && !run->engine().finished()) {
    if (const StepRecord::Failure* f = run->lease_ended(l)) failed = f->evidence;
  } else if (l.report.failed() && l.request.run_id.empty()) {
    // An operator's lease is its own "run": its card faults count as another run's for the cards' health.
    failed = classify_failure({l.report.exit_code, l.report.signal, false, false, l.cards}, parts_.cfg.health, l.report.output);
    if (failed->cause == FailureCause::Card || failed->cause == FailureCause::Infra)
      for (int card : failed->cards) parts_.host.broker().charge(card, l.id, failed->pattern.empty() ? failed->reason : failed->pattern);
    parts_.metrics.failures_by_cause[to_string(failed->cause)]++;
  }
  const double end = epoch_now(), held = std::chrono::duration<double>(steady_now() - l.granted_at).count();
  for (int card : l.cards) {
    const bool charged = failed && std::count(failed->cards.begin(), failed->cards.end(), card);
    parts_.history.card_event({card, "lease", end - held, end, "lease " + l.id + ": " + l.request.label, l.request.run_id,
                          l.request.step ? l.request.step->text() : "", failed ? "failed" : "ended",
                          failed ? to_string(failed->cause) + (charged ? " (charged to this card)" : "") + ": " + failed->reason : l.end_reason});
  }
}

void HostLeases::request(LeaseRequest request, const Caller& by, HostCommands::Reply reply) {
  // Accepted runs may still lease while the daemon drains; nothing else may.
  const std::string& run_id = by.lease_scope();
  HostedRun* run = run_id.empty() ? nullptr : find_run_(run_id);
  if (run && run->engine().finished()) run = nullptr;
  if (parts_.stop.cancelling() || (parts_.stop.draining() && !run)) return reply(parts_.stop.refusal());
  if (run)
    if (auto refused = run->admit_lease(request, by)) return reply(std::move(*refused));
  // Its client (and whoever it tells) reads its lease in the status it asks for next.
  desk.request(std::move(request), run_id, [this, reply = std::move(reply)](Answer a) {
    refresh_();
    reply(std::move(a));
  });
}

void HostLeases::end(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, HostCommands::Reply reply) {
  // Its client reads the freed card in the status it asks for next.
  desk.end(
      id, why, by.lease_scope(),
      [this, reply](Answer a) {
        refresh_();
        reply(std::move(a));
      },
      report);
}

}  // namespace pto
