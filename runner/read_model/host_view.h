#pragma once
// The daemon's read model: what the host is doing, as plain values. The engine thread refreshes it after
// transitions (at most every 10 ms, daemon/model_refresh); every GET renders it (the JSON status, the
// Prometheus text, the HTML page fetches the JSON) and never runs the scheduler, opens the journal or reads a
// configuration file. One writer (the daemon's engine thread), read on the same thread.
#include <cstdint>
#include <functional>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "read_model/receiver_status.h"

#include "config/runner_config.h"

namespace pto {

/// Who holds a card: a step of a run, a lease, a health check, or a program pto-runner does not run.
/// How long a step is expected to take, and from where (plan: expected-minutes or learned from history).
struct StepEstimate {
  double minutes = 0;
  std::string source;  // "expected-minutes" | "history"; "" = no estimate
  int samples = 0;     // history: how many finished runs it was learned from
};

struct HolderView {
  std::string label;          // "job / step", "lease ID: COMMAND", or who holds the lock file
  bool other_program = false;  // the card's lock file is held by a program pto-runner does not run
  std::string run, step, log_url;  // for a step of an active run
  StepEstimate estimate;
  std::string since;  // ISO time the holding began ("" for a program outside pto-runner: not known)
};

struct CardView {
  int id = 0;
  std::string state;  // free | busy | reserved | drained
  std::string type;   // "" untyped
  std::vector<int> group;
  std::string since;  // ISO UTC time the state began
  std::optional<HolderView> holder;  // also on a drained card that still runs something
  std::string drain_reason;
  int consecutive_infra_failures = 0;
  int reserved_for_position = 0;  // 1-based place in the queue of the entry it is reserved for; 0 none
  double busy_seconds = 0;
  std::string health = "good";        // good | suspect | bad | maintenance (sched/device_pool)
  std::vector<std::string> evidence;  // the failures charged to it within the window: "RUN: WHAT"
};

/// A step running in Slurm, as its node shows it.
struct SlurmStepView {
  std::string job, label, run, step, log_url;
  std::vector<int> cards;
};

/// A Slurm node (executor: slurm), with the cards Slurm counts and the steps of ours on it.
struct NodeView {
  std::string name, state, reason, features;
  bool drained = false;
  int cards = 0, cards_used = 0;  // of the configured GRES, every type
  std::vector<SlurmStepView> steps;
};

struct QueueView {
  int position = 0;  // 1-based place in the host's one queue
  std::string label;  // "job / step" or "lease ID: COMMAND"
  int devices = 0;
  std::string reason;
  std::string cluster_reason;  // executor: slurm: Slurm's own reason ("Resources", "Priority")
  double wait_seconds = 0;
  std::string since;
  std::string run, step, run_url, log_url;
  bool probe = false;  // a bisection's probe or a control run's step (left out of oldest_wait_seconds)
  StepEstimate estimate;
  std::uint64_t ticket = 0;  // the dispatcher's id of the request (not shown: `position` says more)
  /// When it is expected to start (sched/start_forecast): seconds from the refresh, and as a time; -1/"": none.
  double eta_seconds = -1;
  std::string eta;
  /// The model's generation (ReadModel::generation) at which it first had a forecast, 0 none: a client that
  /// looked before then is sent it (GET /api/v1/runs/{id}?since=, a waiting step's first forecast).
  std::uint64_t forecast_since = 0;
  /// Why it is where it is, as `sprio` shows a job's priority (sched/queue_order).
  int priority = 0;
  std::string priority_rule;  // the runner.yml `priorities` entry that gave it ("" none)
  double run_card_seconds = 0;  // the card-time its run has used so far
  double fair_share_tag = 0;    // that plus its run's earlier waiting requests' expected card-time
};

struct RunOverview {
  std::string id, state, created, finished;
  int result = -1;  // exit code once finished
  int steps = 0, steps_finished = 0, steps_running = 0, steps_waiting = 0;
  /// An active run's running steps: "job / step" and its log link (what an on-call engineer opens first).
  std::vector<std::pair<std::string, std::string>> running_logs;
  std::string sha, ref, github_run;
  nlohmann::json request;  // as journaled (env names only)
};

struct ToolchainStatus {
  std::string state = "unknown";  // unknown | ready | failed
  std::string version, sha256, root, bin, last_verified, error, run;
};

/// Whether steps run as sandbox users (sandbox/sandbox_pool), and why not.
struct SandboxView {
  bool active = false;
  std::string why_not;  // "" when active
  int users = 0, lent = 0;
  std::vector<std::string> waiting;  // runs waiting for a free sandbox user
};

/// The host's step supervisor (supervise/): whether steps outlive this daemon, and what it took over at start.
struct SupervisorView {
  bool active = false;  // supervise: true and connected
  int pid = 0;
  int steps = 0;        // steps it holds for this daemon now
  std::vector<std::string> taken_over;  // runs this daemon took over from the last one at its start
};

struct HostView {
  std::string version, commit, started, containment;
  SupervisorView supervisor;
  bool simulate = false;
  bool draining = false;  // SIGTERM: no new runs; accepted ones go on
  std::string pin_version, pin_sha256;  // what the definitions ask for, before a lead job ran
  ToolchainStatus toolchain;
  SandboxView sandbox;
  ExecutorKind executor = ExecutorKind::Local;
  std::vector<CardView> cards;     // this host's cards (executor: local)
  std::vector<NodeView> nodes;     // Slurm's nodes (executor: slurm)
  std::string slurm_problem;       // the last failure to read Slurm's state, "" when it answered
  int usable_cards = 0;  // not drained
  /// The host's CPUs and memory (runner.yml host:, else the machine's) and what running steps asked of them
  /// (`cpus:`, `memory:`); local executor only.
  int cpus = 0, cpus_in_use = 0;
  std::uint64_t memory = 0, memory_in_use = 0;
  std::vector<QueueView> queue;  // every entry; the JSON shows the first 50 unless asked for all
  double oldest_wait_seconds = 0;
  /// runner.yml notify's receivers: pending, delivered, failing (notify/notifier).
  std::vector<ReceiverStatus> notify;
  nlohmann::json leases = nlohmann::json::array();
  std::vector<RunOverview> active;
  std::deque<RunOverview> recent;  // finished runs, newest first (the API's run list)
  std::map<std::string, int> runs_by_result;
  /// Each named cache (caches/): bytes on disk, its ccaches' hits and misses since the daemon started.
  struct CacheView {
    unsigned long long bytes = 0;
    long long hits = 0, misses = 0;
  };
  std::map<std::string, CacheView> caches;
};

/// What the read model knows of who uses the cards, for the host's description of them (Host::describe): the step running on each card (local), the
/// run of each lease's cards, the queue position of each ticket, and the steps Slurm placed.
struct CardUser {
  std::string run, step, label, log_url;
  StepEstimate estimate;
  std::vector<int> cards;
  std::string node, executor_job;  // executor: slurm
};
struct HostOccupancy {
  std::map<int, CardUser> on_card;
  std::map<int, std::string> lease_run_of_card;
  std::map<std::uint64_t, int> position_of_ticket;
  std::vector<CardUser> placed;  // steps the cluster placed (executor: slurm)
  /// A step's log link (the API's path), for steps found only in the cluster's own lists.
  std::function<std::string(const std::string& run, const std::string& step)> log_url;
};

}  // namespace pto
