#include "hosting/foreground_run.h"

#include <cstdlib>

#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "host/host.h"
#include "hosting/hosted_run.h"
#include "sandbox/run_tree.h"
#include "caches/cache_tiers.h"
#include "sandbox/sandbox_pool.h"
#include "server/lease_endpoint.h"
#include "store/case_history_queries.h"
#include "util/secret_mask.h"
#include "util/state_paths.h"

namespace pto {

ForegroundRun::ForegroundRun(RunnerConfig cfg, std::string root, ForegroundOptions opts)
    : cfg_(std::move(cfg)), root_(std::move(root)), opts_(std::move(opts)) {}

ForegroundRun::~ForegroundRun() = default;

std::string ForegroundRun::open(ExitCode& code) {
  code = ExitCode::Infrastructure;
  const std::string& state_dir = cfg_.state_dir;
  HostOptions ho;
  ho.simulate = opts_.simulate;
  ho.simulate_lead = opts_.simulate_lead;
  // Its own tag: several `run`s may share a state directory; none cancels another's Slurm jobs.
  ho.slurm_instance = slurm_instance_tag(state_dir) + "-" + std::to_string(::getpid());
  std::string host_error;
  host_ = wire_host(io_, cfg_, ho, host_error);
  if (!host_) return host_error;

  // Inherited PTO_RUNNER_* (a submit token, another run's ids) never reach steps; the engine sets its own.
  eo_ = make_engine_options(root_, state_dir, cfg_, opts_.simulate, opts_.time_scale, InheritedEnv::AllButOurs);
  eo_.lead_executor = host_->lead_executor.get();
  // A split step's tests weighed by the test history a daemon kept in this state dir, when there is one.
  if (std::filesystem::exists(journal_file(state_dir)))
    eo_.test_seconds = [history = TestHistoryQueries(journal_file(state_dir))](const std::vector<std::string>& ids) {
      return history.learned_seconds(ids);
    };
  eo_.trace_file = opts_.trace_file;
  // Steps whose harness borrows cards itself (task-submit) lease them from this run's queue, as under serve.
  if (!opts_.simulate) {
    leases_ = std::make_unique<LeaseEndpoint>(io_, *host_, cfg_.kill_grace_seconds);
    if (std::string e = leases_->start(); !e.empty()) return "cannot serve the run's card leases: " + e;
  }

  // As root with sandbox users (runner.yml sandbox:), the run's steps run as one of them, as under serve;
  // run by anyone else, they run as that user (who runs their own code). A simulated run's steps only sleep.
  SandboxConfig sandbox_cfg = cfg_.sandbox;
  if (opts_.simulate) sandbox_cfg.enabled = false;
  sandbox_ = std::make_unique<SandboxPool>(sandbox_cfg, cfg_.shared_files, cfg_.all_card_files(), cfg_.lock_dir);
  // Said, as serve says it: runner.yml asks for sandbox users and root's steps run as root instead.
  if (sandbox_cfg.enabled && ::geteuid() == 0 && !sandbox_->active()) warnings_.push_back("NO SANDBOX: the steps run as root: " + sandbox_->why());
  if (!sandbox_->active()) return "";
  if (std::string e = unreachable_by_users({{state_dir, "the state dir"}, {eo_.root, "the root"}}, "sandbox: off in runner.yml"); !e.empty()) {
    code = ExitCode::BadInput;
    return e;
  }
  return close_state_dir(state_dir);
}

bool ForegroundRun::run(const Plan& plan, RunObserver& observer) {
  if (leases_) site_.emplace(LeaseSite{leases_->access(), leases_->book(), leases_->url()});
  RunHosting lent{io_, *host_->clock, host_->broker(), *host_->executor, *sandbox_, cfg_, site_ ? &*site_ : nullptr, nullptr};
  // Its caches' tier by $GITHUB_REF (a workflow's run; none: a tier of its own, "local"). `run` trusts its
  // caller: whoever runs it on the host could write there anyway; the daemon is what scopes untrusted runs.
  const char* ref = std::getenv("GITHUB_REF");
  eo_.caches = caches_for_run(cfg_, ref ? ref : "", eo_.run_dir, sandbox_->active());
  if (!eo_.caches->remote_credential().empty()) {
    if (!eo_.mask) eo_.mask = std::make_shared<SecretMask>();
    eo_.mask->add(eo_.caches->remote_credential());
  }
  run_ = std::make_unique<HostedRun>(lent, plan, eo_, nlohmann::json::object(), &observer, nullptr);
  HostedRun& run = *run_;
  if (leases_) {
    leases_->set_admit([&run](LeaseRequest& r, const Caller& by) { return run.admit_lease(r, by); });
    leases_->desk().set_card_access([&run](const Lease& l, bool granted) { run.lease_card_access(l, granted); });
    leases_->desk().set_on_ended([&run](const Lease& l) {
      if (!run.engine().finished()) run.lease_ended(l);
    });
  }
  boost::asio::signal_set signals(io_, SIGINT, SIGTERM);
  std::function<void()> wait_signal = [&] {
    signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (on_signal_) on_signal_(sig);
      run.cancel(sig);
      if (leases_) leases_->close("the run was cancelled");
      wait_signal();
    });
  };
  wait_signal();
  run.set_on_finished([&](HostedRun&) {
    signals.cancel();
    if (leases_) leases_->close("its run ended");
    // Its tree back to root and its user back to the pool, then nothing is left to do.
    run.give_back([&] { host_->reaper->stop(); });  // the io_context then runs out of work and run() returns
  });
  if (!run.begin()) return false;
  io_.run();
  return true;
}

const RunEngine& ForegroundRun::engine() const { return run_->engine(); }

}  // namespace pto
