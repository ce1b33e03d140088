#include "slurm/slurm_executor.h"

#include <boost/asio.hpp>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <algorithm>
#include <fstream>
#include <map>

#include "config/device_spec.h"
#include "exec/process_marker.h"
#include "slurm/srun_env.h"
#include "util/process_env.h"
#include "util/random_hex.h"
#include "util/clock.h"

namespace asio = boost::asio;

namespace pto {

namespace {

// Runs inside the job: $1 the nonce, then the step's shell argv. A custom GRES sets no index variable, so the
// indices come from the job's own record. The placement line starts with \036 (RS) and carries the nonce,
// so no output of the step can pose as it (it is taken only before the step's shell starts).
// In a lease's job ($1 = lease:MAX) there is no placement line; {} in the command becomes the cards, and
// task-submit's --max-time (MAX seconds, 0: none) counts from here, where the command starts, and ends it with
// task-submit's exit 137.
constexpr const char* kWrapper = R"SH(nonce=$1; shift
detail=$(scontrol show job -d "$SLURM_JOB_ID" 2>&1) || {
  echo "pto-runner: cannot read the cards Slurm allocated to job $SLURM_JOB_ID: $detail" >&2; exit 125; }
ids=
for spec in $(printf '%s\n' "$detail" | grep -o 'IDX:[0-9,-]*'); do
  IFS=, read -ra parts <<<"${spec#IDX:}"
  for p in "${parts[@]}"; do
    [ -n "$p" ] || continue
    case $p in
      *-*) for ((i = ${p%-*}; i <= ${p#*-}; i++)); do ids=${ids:+$ids,}$i; done ;;
      *) ids=${ids:+$ids,}$p ;;
    esac
  done
done
[ -n "$ids" ] || { echo "pto-runner: no card indices in Slurm job $SLURM_JOB_ID (a GRES without File=?)" >&2; exit 125; }
export TASK_DEVICE=$ids DEVICE_ID=${ids%%,*}
if [ "${nonce%%:*}" = lease ]; then
  set -- "${@:1:$#-1}" "${!#//\{\}/$ids}"
  max=${nonce#lease:}
  if [ "$max" != 0 ]; then
    timeout -k 3 "$max" "$@"; rc=$?
    [ $rc = 124 ] && { echo "[task-submit] killed after --max-time $max s" >&2; rc=137; }
    exit $rc
  fi
else
  printf '\036pto-runner-placed %s %s %s %s\n' "$nonce" "$SLURM_JOB_ID" "${SLURMD_NODENAME:-unknown}" "${ids:--}"
fi
exec "$@"
)SH";

std::string run_of(const StepLaunch& l) {
  auto marker = ProcessMarker::parse(l.marker);
  return marker ? marker->run : std::string();
}

std::vector<int> parse_ids(const std::string& s) {
  std::string error;
  return s == "-" ? std::vector<int>{} : parse_card_list(s, error).value_or(std::vector<int>{});
}

class SlurmStep : public std::enable_shared_from_this<SlurmStep> {
 public:
  SlurmStep(asio::io_context& io, SlurmCluster& cluster, Executor& local, StepLaunch launch,
            std::function<void(const StepOutcome&)> done, std::function<void()> on_finished)
      : io_(io), cluster_(cluster), local_(local), launch_(std::move(launch)), done_(std::move(done)),
        on_finished_(std::move(on_finished)), deadline_(io), phase_(io), grace_(io) {}

  /// From the moment the engine hands the step over, queued here or not: timeout-minutes counts from now, as
  /// its clock counts the wait for cards with the local executor; queue-timeout-minutes until it is placed.
  void arm() {
    auto self = shared_from_this();
    after(deadline_, launch_.timeout_seconds, [self] { self->terminate(true, "timeout-minutes"); });
    after(phase_, launch_.wait_timeout_seconds, [self] { self->terminate(true, "queue-timeout-minutes: not placed in time"); });
  }

  /// Submits it (srun, under the local executor).
  void start() {
    submitted_ = true;
    name_ = job_name_of(launch_.marker);
    nonce_ = random_hex(8);
    const std::string group_type = launch_.devices > 1 ? cluster_.pick_group_type(launch_.devices, launch_.device_type) : "";
    StepLaunch shown = launch_;  // srun's --time: what is left of the step's time now
    shown.timeout_seconds = left_seconds();
    std::vector<std::string> argv =
        slurm_step_argv(cluster_.config(), shown, name_, cluster_.comment(run_of(launch_), launch_.label.substr(0, 200)),
                        group_type, nonce_);
    StepLaunch inner;
    inner.label = launch_.label;
    for (const auto& a : argv) inner.command += (inner.command.empty() ? "" : " ") + shell_quote(a);
    inner.command = "exec " + inner.command;
    inner.working_directory = launch_.working_directory;
    for (const auto& kv : launch_.env)
      if (!srun_reads(kv)) inner.env.push_back(kv);
    // srun finds the cluster the way the daemon does.
    for (const char* var : {"SLURM_CONF", "SLURM_CLUSTERS"})
      if (const char* v = std::getenv(var)) inner.env.push_back(std::string(var) + "=" + v);
    inner.log_path = launch_.log_path;
    inner.marker = launch_.marker;
    inner.grace_seconds = launch_.grace_seconds;
    inner.log_max_bytes = launch_.log_max_bytes;
    inner.on_line = launch_.on_line;
    inner.mask = launch_.mask;
    auto self = shared_from_this();
    inner.take_line = [self](std::string_view line) { return self->take_line(line); };
    inner.take_prefix = "\036pto-runner-placed " + nonce_ + " ";  // the same line, from a supervisor
    cluster_.watch(name_, launch_.label, [self](const SlurmJob& j) { self->on_update(j); });
    cluster_.note_submitted(name_, group_type, launch_.devices);
    cluster_.poke();
    inner_ = local_.start(std::move(inner), [self](const StepOutcome& o) { self->on_srun_done(o); });
  }

  /// A step an earlier daemon submitted and Slurm placed at `where`, its srun held meanwhile by the step
  /// supervisor: followed again (its job watched, its cancel through scancel); `reattach` takes srun's hold.
  /// False when nothing holds it any more.
  bool adopt(const Placement& where, const ReattachInner& reattach) {
    submitted_ = placed_ = true;
    name_ = job_name_of(launch_.marker);
    job_ = where.job;
    auto self = shared_from_this();
    cluster_.watch(name_, launch_.label, [self](const SlurmJob& j) { self->on_update(j); });
    inner_ = reattach([self](const StepOutcome& o) { self->on_srun_done(o); }, nullptr);
    if (!inner_) cluster_.unwatch(name_);
    return inner_ != 0;
  }

  /// Cancelled (or out of time): a placed step gets SIGTERM through Slurm, SIGKILL and scancel after the
  /// grace period; one Slurm has not placed yet is withdrawn (srun, on SIGTERM, revokes its request; Slurm
  /// refuses to signal a pending job); one never submitted ends at once.
  void terminate(bool timed_out, const std::string& why = "") {
    if (finished_ || terminating_) return;
    terminating_ = true;
    (timed_out ? timed_out_ : cancelled_) = true;
    const std::string what = timed_out ? "timed out (" + why + ")" : "cancelled";
    if (!submitted_) {
      say(what + " while queued here (slurm.max-cards), before it was submitted to Slurm");
      StepOutcome o;
      o.timed_out = timed_out_;
      o.cancelled = cancelled_;
      // Reported later, as every executor reports: the engine may be walking its steps (cancel_job).
      asio::post(io_, [self = shared_from_this(), o] { self->finish(o); });
      return;
    }
    deadline_.cancel();
    phase_.cancel();
    auto self = shared_from_this();
    if (!placed_) {
      say(what + " before Slurm placed it: its request is withdrawn");
      if (!job_.empty()) cluster_.command({"scancel", job_});
      local_.cancel(inner_);  // SIGTERM to srun (it revokes the pending job), SIGKILL after the grace period
      return;
    }
    say(what + "; scancel --signal=TERM Slurm job " + job_);
    cluster_.command({"scancel", "--signal=TERM", job_});
    after(grace_, std::max(0.001, launch_.grace_seconds), [self] {  // 0: at once, never "no escalation"
      if (self->srun_done_) return;
      self->say("grace period over; SIGKILL to Slurm job " + self->job_ + " and scancel");
      self->cluster_.command({"scancel", "--signal=KILL", self->job_},
                             [self](const SlurmCommandResult&) { self->cluster_.command({"scancel", self->job_}); });
      // srun ends once its job does; if it does not, the local executor ends it (SIGTERM, SIGKILL).
      after(self->grace_, 5, [self] {
        if (!self->srun_done_) self->local_.cancel(self->inner_);
      });
    });
  }

 private:
  template <class F>
  static void after(asio::steady_timer& t, double seconds, F f) {
    if (seconds <= 0) return;
    t.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
    t.async_wait([f = std::move(f)](boost::system::error_code ec) {
      if (!ec) f();
    });
  }

  /// The longest it may still run, for srun's --time: what timeout-minutes leaves, and run-timeout-minutes.
  double left_seconds() const {
    double left = 0;
    if (launch_.timeout_seconds > 0)
      left = std::max(1.0, launch_.timeout_seconds - std::chrono::duration<double>(steady_now() - armed_).count());
    if (launch_.run_timeout_seconds > 0) left = left > 0 ? std::min(left, launch_.run_timeout_seconds) : launch_.run_timeout_seconds;
    return left;
  }

  bool take_line(std::string_view line) {
    static constexpr std::string_view kQueued = "srun: job ";
    if (line.substr(0, kQueued.size()) == kQueued && job_.empty()) {  // "srun: job 12 queued and waiting ..."
      auto rest = line.substr(kQueued.size());
      auto sp = rest.find(' ');
      std::string id(rest.substr(0, sp));
      if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) job_ = id;
      return false;
    }
    const std::string prefix = "\036pto-runner-placed " + nonce_ + " ";
    if (line.substr(0, prefix.size()) != prefix) return false;
    std::string rest(line.substr(prefix.size()));
    std::string job = rest.substr(0, rest.find(' '));
    rest = rest.find(' ') == std::string::npos ? "" : rest.substr(rest.find(' ') + 1);
    std::string node = rest.substr(0, rest.find(' '));
    std::string ids = rest.find(' ') == std::string::npos ? "" : rest.substr(rest.find(' ') + 1);
    job_ = job;
    place({node, parse_ids(ids), job});
    return true;
  }

  void on_update(const SlurmJob& j) {
    if (finished_) return;
    if (job_.empty()) job_ = j.id;
    if (j.pending()) {
      std::string reason = j.wait_reason();
      if (reason != last_reason_ && launch_.on_waiting) launch_.on_waiting(reason);
      last_reason_ = reason;
    } else if (!placed_ && !j.cards.empty()) {
      place({j.node, j.cards, j.id});  // the snapshot saw it running before its wrapper spoke
    }
  }

  void place(const Placement& p) {
    if (placed_ || finished_) return;
    placed_ = true;
    phase_.cancel();  // the queue limit is over; run-timeout-minutes counts from here
    auto self = shared_from_this();
    if (!terminating_)
      after(phase_, launch_.run_timeout_seconds, [self] { self->terminate(true, "run-timeout-minutes"); });
    if (launch_.on_placed) launch_.on_placed(p);
  }

  void on_srun_done(StepOutcome o) {
    srun_done_ = true;
    deadline_.cancel();
    phase_.cancel();
    grace_.cancel();
    o.timed_out = timed_out_;
    o.cancelled = cancelled_ && !timed_out_;
    if (!placed_ && o.error.empty() && !terminating_ && o.exit_code != 0)
      o.error = "srun failed before the step started (exit " + std::to_string(o.exit_code) + "; its log says why)";
    // Ended by us, or killed: make sure Slurm holds nothing of it any more (not waited for: the step is over
    // here, and a slow slurmctld must not hold the run).
    if ((terminating_ || o.signal) && !job_.empty()) cluster_.command({"scancel", job_});
    finish(o);
  }

  void finish(const StepOutcome& o) {
    if (finished_) return;
    finished_ = true;
    deadline_.cancel();
    phase_.cancel();
    grace_.cancel();
    if (submitted_) cluster_.unwatch(name_);
    auto done = std::move(done_);
    on_finished_();
    done(o);
  }

  void say(const std::string& what) {
    std::ofstream(launch_.log_path, std::ios::app) << "\npto-runner: " << what << "\n";
  }

  asio::io_context& io_;
  SlurmCluster& cluster_;
  Executor& local_;
  StepLaunch launch_;
  std::function<void(const StepOutcome&)> done_;
  std::function<void()> on_finished_;
  asio::steady_timer deadline_, phase_, grace_;  // timeout-minutes; queue- then run-timeout-minutes; the grace
  std::chrono::steady_clock::time_point armed_ = steady_now();
  std::string name_, nonce_, job_, last_reason_;
  std::uint64_t inner_ = 0;
  bool submitted_ = false, placed_ = false, terminating_ = false, timed_out_ = false, cancelled_ = false,
       srun_done_ = false, finished_ = false;
};

// Slurm is the queue, but not for everything at once: a run of 200 one-card steps submitted together would
// be 200 srun processes and 200 pending jobs for slurmctld to schedule on every pass (measured: 1.65x the
// cost of the same steps submitted 8 at a time, bench/slurm_overhead.sh). Steps are submitted while the
// cards of our jobs in Slurm stay within slurm.max-cards (default: the cluster's usable cards); the rest wait
// here, in order, and say so.
class SlurmExecutor : public Executor {
 public:
  SlurmExecutor(asio::io_context& io, SlurmCluster& cluster, std::unique_ptr<Executor> local)
      : io_(io), cluster_(cluster), local_(std::move(local)) {
    listener_ = cluster_.add_snapshot_listener([this] { admit(); });  // drained or added nodes change the capacity
  }
  ~SlurmExecutor() override { cluster_.remove_snapshot_listener(listener_); }

  std::uint64_t start(StepLaunch launch, std::function<void(const StepOutcome&)> done) override {
    const std::uint64_t handle = ++next_;
    if (launch.devices <= 0) {  // no cards: this host runs it
      local_only_[handle] = local_->start(std::move(launch), [this, handle, done = std::move(done)](const StepOutcome& o) {
        local_only_.erase(handle);
        done(o);
      });
      return handle;
    }
    const int devices = launch.devices;
    auto on_waiting = launch.on_waiting;
    const std::string marker = launch.marker, label = launch.label;
    auto step = std::make_shared<SlurmStep>(io_, cluster_, *local_, std::move(launch), std::move(done),
                                            [this, handle] { ended(handle); });
    steps_[handle] = {step, devices, false, marker};
    step->arm();
    gate_.push_back(handle);
    admit();
    if (steps_.count(handle) && !steps_[handle].submitted) {
      const std::string why = "queued here: the jobs already in Slurm hold " + std::to_string(in_flight_) + " of " +
                              std::to_string(capacity()) + " cards (slurm.max-cards)";
      cluster_.queue_here({marker, label, why, devices, wall_now()});
      if (on_waiting) on_waiting(why);
    }
    return handle;
  }

  void cancel(std::uint64_t handle) override {
    if (auto it = local_only_.find(handle); it != local_only_.end()) return local_->cancel(it->second);
    if (auto it = steps_.find(handle); it != steps_.end()) it->second.step->terminate(false);
  }

  std::size_t active() const override { return steps_.size() + local_only_.size(); }

  std::uint64_t adopt(const StepLaunch& what, const Placement& where, const ReattachInner& reattach, std::function<void(const StepOutcome&)> done) {
    const std::uint64_t handle = ++next_;
    if (where.job.empty()) {  // a step without cards, run on this host
      const std::uint64_t inner = reattach([this, handle, done = std::move(done)](const StepOutcome& o) {
        local_only_.erase(handle);
        done(o);
      }, nullptr);
      if (!inner) return 0;
      local_only_[handle] = inner;
      return handle;
    }
    auto step = std::make_shared<SlurmStep>(io_, cluster_, *local_, what, std::move(done), [this, handle] { ended(handle); });
    const int devices = std::max<int>(1, static_cast<int>(where.cards.size()));
    steps_[handle] = {step, devices, true, what.marker};
    in_flight_ += devices;
    if (!step->adopt(where, reattach)) {
      in_flight_ -= devices;
      steps_.erase(handle);
      return 0;
    }
    return handle;
  }
  bool places(const StepLaunch& l) const override { return l.devices > 0; }

 private:
  int capacity() const {
    if (cluster_.config().max_cards > 0) return cluster_.config().max_cards;
    int cards = 0;
    for (const auto& n : cluster_.nodes())
      if (!n.drained())
        for (const auto& [type, count] : n.total) cards += count;
    return cards > 0 ? cards : static_cast<int>(cluster_.runner().device_ids.size());
  }

  void admit() {
    while (!gate_.empty()) {
      auto it = steps_.find(gate_.front());
      if (it == steps_.end()) {  // ended while queued here (cancelled, out of time)
        gate_.pop_front();
        continue;
      }
      auto& s = it->second;
      if (in_flight_ > 0 && in_flight_ + s.devices > capacity()) return;  // an oversized step still goes alone
      gate_.pop_front();
      cluster_.unqueue_here(s.marker);
      s.submitted = true;
      in_flight_ += s.devices;
      s.step->start();
    }
  }

  void ended(std::uint64_t handle) {
    auto it = steps_.find(handle);
    if (it == steps_.end()) return;
    if (it->second.submitted) in_flight_ -= it->second.devices;
    else cluster_.unqueue_here(it->second.marker);
    steps_.erase(it);
    asio::post(io_, [this] { admit(); });
  }

  struct Entry {
    std::shared_ptr<SlurmStep> step;
    int devices = 0;
    bool submitted = false;
    std::string marker;
  };
  asio::io_context& io_;
  SlurmCluster& cluster_;
  std::unique_ptr<Executor> local_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, Entry> steps_;
  std::deque<std::uint64_t> gate_;  // not yet submitted, in order
  int in_flight_ = 0;               // cards asked for by our jobs in Slurm
  int listener_ = 0;
  std::map<std::uint64_t, std::uint64_t> local_only_;
};

}  // namespace

namespace {

// srun's options for one job of ours on one node: the cards (a group's GRES type for several), its CPUs and
// memory when the step asks, the card type
// as a feature, the partition, a time limit (seconds of work plus the grace, in whole minutes, plus one: a
// backstop behind pto-runner's own timers), then slurm.args and the wrapper.
std::vector<std::string> srun_prefix(const SlurmConfig& cfg, const std::string& name, const std::string& comment, int devices,
                                     const std::string& device_type, const std::string& group_type, double seconds,
                                     double grace, const std::string& chdir, const std::string& wrapper_mode, int cpus = 0,
                                     std::uint64_t memory = 0) {
  std::vector<std::string> a = {"srun", "--job-name=" + name, "--comment=" + comment, "--nodes=1", "--ntasks=1",
                                "--gres=" + cfg.gres + (group_type.empty() ? "" : ":" + group_type) + ":" + std::to_string(devices)};
  // The step's `cpus:` and `memory:` are Slurm's to grant there (memory in whole MiB, rounded up).
  if (cpus > 0) a.push_back("--cpus-per-task=" + std::to_string(cpus));
  if (memory > 0) a.push_back("--mem=" + std::to_string((memory + (1 << 20) - 1) >> 20) + "M");
  if (!device_type.empty()) a.push_back("--constraint=" + device_type);
  if (!cfg.partition.empty()) a.push_back("--partition=" + cfg.partition);
  if (seconds > 0) a.push_back("--time=" + std::to_string(static_cast<long>(std::ceil((seconds + grace) / 60.0)) + 1));
  if (!chdir.empty()) a.push_back("--chdir=" + chdir);
  a.insert(a.end(), cfg.args.begin(), cfg.args.end());
  a.insert(a.end(), {"/bin/bash", "-c", kWrapper, "pto-runner-slurm-step", wrapper_mode});
  return a;
}

}  // namespace

std::vector<std::string> slurm_step_argv(const SlurmConfig& cfg, const StepLaunch& launch, const std::string& name,
                                         const std::string& comment, const std::string& group_type,
                                         const std::string& nonce) {
  std::vector<std::string> a = srun_prefix(cfg, name, comment, launch.devices, launch.device_type, group_type,
                                           launch.timeout_seconds, launch.grace_seconds, launch.working_directory, nonce,
                                           launch.limits.cpus, launch.limits.memory_asked ? launch.limits.memory_max : 0);
  if (launch.shell == "sh") a.insert(a.end(), {"/bin/sh", "-e", "-c", launch.command});
  else a.insert(a.end(), {"/bin/bash", "-e", "-o", "pipefail", "-c", launch.command});
  return a;
}

std::vector<std::string> slurm_lease_argv(const SlurmCluster& cluster, const std::string& marker, const std::string& run,
                                          const std::string& label, int devices, const std::string& device_type,
                                          double max_seconds, double wait_seconds) {
  const std::string group_type = devices > 1 ? cluster.pick_group_type(devices, device_type) : "";
  // Slurm takes comments up to 1024 bytes: the label (a whole command line) is cut well before.
  auto a = srun_prefix(cluster.config(), job_name_of(marker), cluster.comment(run, label.substr(0, 200)), devices,
                       device_type, group_type, max_seconds, 3, "",
                       "lease:" + std::to_string(static_cast<long long>(std::ceil(max_seconds))));
  // task-submit's --timeout: srun gives up when Slurm has not placed the job within it (exit 1, "no card").
  if (wait_seconds > 0)
    a.insert(a.begin() + 1, "--immediate=" + std::to_string(static_cast<long long>(std::ceil(wait_seconds))));
  return a;
}

std::unique_ptr<Executor> make_slurm_executor(asio::io_context& io, SlurmCluster& cluster, std::unique_ptr<Executor> local) {
  return std::make_unique<SlurmExecutor>(io, cluster, std::move(local));
}

std::uint64_t adopt_slurm_step(Executor& slurm, const StepLaunch& what, const Placement& where, const ReattachInner& reattach,
                               std::function<void(const StepOutcome&)> done) {
  auto* e = dynamic_cast<SlurmExecutor*>(&slurm);
  return e ? e->adopt(what, where, reattach, std::move(done)) : 0;
}

}  // namespace pto
