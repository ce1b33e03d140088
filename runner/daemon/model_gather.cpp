// A refresh of the read model (read_model/): what each owner knows (the host's settings and sandbox, the
// runs, the queue, the leases, the cards, the receivers) gathered into the model the API renders. When it runs
// is the rest of daemon/model_refresh; what the runs and the queue look like there is describe_runs'.
#include "daemon/model_refresh.h"
#include "exec/cgroup_tree.h"
#include "host/host.h"
#include "hosting/run_host.h"
#include "hosting/shutdown.h"
#include "notify/host_notices.h"
#include "sandbox/sandbox_pool.h"
#include "store/run_history.h"
#include "store/run_reporter.h"
#include "store/run_store.h"
#include "config/versions_env.h"
#include "util/build_commit.h"
#include "util/clock.h"

namespace pto {

void ModelRefresh::now() {
  if (!from_) return;  // not armed yet: nothing to read
  const auto began = steady_now();
  const ViewSources& f = *from_;
  ++model.generation;
  HostView& v = model.host;
  v.draining = f.stop.draining();
  v.containment = CgroupTree::instance().available() ? "cgroup" : "process group + sweep";
  v.supervisor.active = f.host.supervised != nullptr;
  if (f.host.supervised) {
    v.supervisor.pid = f.host.supervised->supervisor_pid();
    v.supervisor.steps = static_cast<int>(f.host.supervised->active());
  }
  v.toolchain = f.store.reporter().toolchain();
  const SandboxPool& sandbox = f.runs.sandbox();
  v.sandbox.active = sandbox.active();
  v.sandbox.why_not = sandbox.why();
  v.sandbox.users = static_cast<int>(sandbox.size());
  v.sandbox.lent = static_cast<int>(sandbox.size() - sandbox.free_count());
  v.sandbox.waiting = f.runs.waiting_for_user();
  model.metrics.journal_failing = f.store.history().journal_failing();
  model.metrics.leases_by_end = f.runs.leases().book.ended_by_reason();
  model.metrics.tests_muted = f.store.mutes_in_force();  // a mute that ended today is out of the count
  model.metrics.tests_flaky = f.store.history().tests_flaky();
  model.host.caches.clear();
  for (const auto& [name, bytes] : model.metrics.cache_bytes) model.host.caches[name].bytes = bytes;
  for (const auto& [name, n] : model.metrics.cache_hits) model.host.caches[name].hits = n;
  for (const auto& [name, n] : model.metrics.cache_misses) model.host.caches[name].misses = n;

  f.host.describe(v, describe_runs(model, f.host.broker().queue(), f.runs.leases().book.active()));
  // A card drained or returned since the last refresh (by a person, by its failures, by a reload): the cards'
  // history says when and why.
  for (CardEvent& e : drain_changes(v, epoch_now())) f.store.history().card_event(std::move(e));
  v.leases = f.runs.leases().desk.active_json();
  f.notices.queue(v);
  v.notify = f.notices.status();
  v.runs_by_result["running"] = static_cast<int>(model.active.size());
  refreshed(host_busy(v), began);
}

void ModelRefresh::describe_daemon(const std::string& root, bool simulate) {
  model.host.version = PTO_RUNNER_VERSION;
  model.host.commit = kBuildCommit;
  model.host.simulate = simulate;
  Diagnostics d;
  VersionsEnv pin = load_versions_env(root + "/toolchain/versions.env", "toolchain/versions.env", d);
  model.host.pin_version = pin.ptoas_version;
  model.host.pin_sha256 = pin.sha256_for(host_arch());
}

}  // namespace pto
