// The daemon's refresh of the read model (read_model/): it gathers what each owner knows (the host's
// settings and sandbox, the runs, the queue, the leases, the cards) into the model the API renders. When it
// runs is daemon/model_refresh's to say; what the runs and the queue look like there is describe_runs'.
#include "daemon/daemon.h"
#include "testcases/mutes.h"
#include "exec/cgroup_tree.h"
#include "sandbox/sandbox_pool.h"

namespace pto {

void Daemon::refresh_view() {
  ++view_.model.generation;
  HostView& v = view_.model.host;
  v.draining = stop_.draining();
  v.containment = CgroupTree::instance().available() ? "cgroup" : "process group + sweep";
  v.supervisor.active = host_->supervised != nullptr;
  if (host_->supervised) {
    v.supervisor.pid = host_->supervised->supervisor_pid();
    v.supervisor.steps = static_cast<int>(host_->supervised->active());
  }
  v.toolchain = store_->reporter().toolchain();
  const SandboxPool& sandbox = runs_->sandbox();
  v.sandbox.active = sandbox.active();
  v.sandbox.why_not = sandbox.why();
  v.sandbox.users = static_cast<int>(sandbox.size());
  v.sandbox.lent = static_cast<int>(sandbox.size() - sandbox.free_count());
  v.sandbox.waiting = runs_->waiting_for_user();
  view_.model.metrics.journal_failing = store_->history().journal_failing();
  view_.model.metrics.leases_by_end = runs_->leases().book.ended_by_reason();
  view_.model.metrics.tests_muted = store_->mutes_in_force();  // a mute that ended today is out of the count
  view_.model.metrics.tests_flaky = store_->history().tests_flaky();

  host_->describe(v, describe_runs(view_.model, host_->broker().queue(), runs_->leases().book.active()));
  // A card drained or returned since the last refresh (by a person, by its failures, by a reload): the cards'
  // history says when and why.
  for (CardEvent& e : view_.drain_changes(v, epoch_now())) store_->history().card_event(std::move(e));
  v.leases = runs_->leases().desk.active_json();
  notices_->queue(v);
  v.notify = notices_->status();
  v.runs_by_result["running"] = static_cast<int>(view_.model.active.size());
  view_.refreshed(host_busy(v));
}

}  // namespace pto
