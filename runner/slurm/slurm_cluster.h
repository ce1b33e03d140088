#pragma once
// SlurmCluster: what the Slurm executor and broker know of the cluster, and the one place that asks it. A
// poller thread runs `squeue --json` and `sinfo --json` (every slurm.poll-seconds while jobs of ours wait or
// run, every 5 s otherwise) and hands each snapshot to the engine thread, where the jobs being watched hear
// their state (Slurm's pending reason, the node and cards once running). Other commands (scancel, scontrol
// update) run on a worker. Our jobs are told apart by their comment: "pto-runner instance=TAG run=ID ...",
// TAG naming this daemon's state directory on this host, so a restarted daemon finds what it left.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/runner_config.h"
#include "slurm/slurm_command.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace pto {

class SlurmCluster {
 public:
  /// `instance`: the tag of this daemon's jobs (see slurm_instance_tag).
  SlurmCluster(boost::asio::io_context& io, const RunnerConfig& cfg, std::string instance);
  ~SlurmCluster();

  const SlurmConfig& config() const { return cfg_; }
  const RunnerConfig& runner() const { return runner_; }
  const std::string& instance() const { return instance_; }
  /// The comment of a job of ours for run `run` and step `label`.
  std::string comment(const std::string& run, const std::string& label) const;

  /// Follows the job named `name` (engine thread): `on_update` hears each snapshot's view of it.
  void watch(const std::string& name, std::string label, std::function<void(const SlurmJob&)> on_update);
  void unwatch(const std::string& name);
  /// A job submitted but not seen running yet counts against its group type when choosing one.
  void note_submitted(const std::string& name, const std::string& group_type, int devices);

  /// The latest snapshot (engine thread): our jobs that are still active, and every node.
  const std::vector<SlurmJob>& jobs() const { return jobs_; }
  const std::vector<SlurmNode>& nodes() const { return nodes_; }
  const std::string& problem() const { return problem_; }  // the last poll's failure, "" when it worked
  /// Who a job of ours is for ("job / step"), by its name; "" if not watched.
  std::string label_of(const std::string& name) const;
  int devices_of(const std::string& name) const;

  /// Steps the executor holds back before submitting (slurm.max-cards), for the queue view, in order.
  struct QueuedHere {
    std::string marker, label, reason;
    int devices = 0;
    std::chrono::system_clock::time_point since;
  };
  void queue_here(QueuedHere q) { queued_here_.push_back(std::move(q)); }
  void unqueue_here(const std::string& marker);
  const std::vector<QueuedHere>& queued_here() const { return queued_here_; }

  /// For a step of `devices` > 1 cards (of card type `card_type`, "" any): the GRES type of the card group it
  /// should ask for, among the groups big enough whose cards are all of that type: the one with the fewest
  /// cards in use on its least busy node (Slurm's own counts, plus our submissions not yet running). "" when no
  /// group fits (then the step asks for untyped cards on a node with the type's feature).
  std::string pick_group_type(int devices, const std::string& card_type) const;

  /// Runs a Slurm command on a worker; `done` (optional) on the engine thread.
  void command(std::vector<std::string> argv, std::function<void(const SlurmCommandResult&)> done = {});
  /// Polls now rather than at the next period.
  void poke();
  void set_on_change(std::function<void()> f) { on_change_ = std::move(f); }
  /// Also told of each snapshot (the executor: the cluster's cards may have changed).
  int add_snapshot_listener(std::function<void()> f) {
    listeners_[++last_listener_] = std::move(f);
    return last_listener_;
  }
  void remove_snapshot_listener(int id) { listeners_.erase(id); }

  /// Slurm's drain of a node with the reason (`drain`), or its return to service. Blocking (at most 10 s):
  /// an operator's rare action.
  SlurmCommandResult set_node_drained(const std::string& node, bool drain, const std::string& reason);

  /// At a daemon's start (it holds the state directory, so nothing of this instance can be running but what
  /// it took over): cancels every job this instance left in Slurm, but those named in `keep`. Blocking.
  /// Returns what it did, for the log.
  std::vector<std::string> cancel_leftovers(const std::set<std::string>& keep = {});

 private:
  void poll_loop();
  void take_snapshot(std::vector<SlurmJob> jobs, std::vector<SlurmNode> nodes, std::string problem);
  bool ours(const SlurmJob& j) const;

  boost::asio::io_context& io_;
  RunnerConfig runner_;
  SlurmConfig cfg_;
  std::string instance_;
  std::unique_ptr<boost::asio::thread_pool> workers_;
  std::function<void()> on_change_;
  std::map<int, std::function<void()>> listeners_;
  int last_listener_ = 0;
  struct Watched {
    std::string label;
    std::function<void(const SlurmJob&)> on_update;
    std::string group_type;
    int devices = 0;
  };
  std::map<std::string, Watched> watched_;  // by job name (engine thread)
  std::vector<QueuedHere> queued_here_;
  std::vector<SlurmJob> jobs_;
  std::vector<SlurmNode> nodes_;
  std::string problem_;
  // poller
  std::thread poller_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, poked_ = false;
  int watching_ = 0;  // under mu_: how many jobs are followed (poll fast while any)
};

/// The tag of the jobs of the daemon on this host with this state directory.
std::string slurm_instance_tag(const std::string& state_dir);

}  // namespace pto
