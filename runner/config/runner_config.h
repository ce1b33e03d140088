#pragma once
// runner.yml: host settings (cards, lock and state directories, health policy, daemon address). Every key is
// optional; command-line flags override it (see commands/common_options.cpp).
#include <cstdint>
#include <memory>
#include <regex>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/diagnostics.h"
#include "config/failure_cause.h"

namespace pto {

/// `health.fault-patterns` entry: a log line matching `pattern` charges the failure to `cause` (card or infra);
/// `card-group` N > 0: the card the line names is the regex's group N (pypto's `device_id=(\d+)`), else the
/// step's own cards.
struct FaultPattern {
  std::string pattern;
  std::shared_ptr<const std::regex> re;
  FailureCause cause = FailureCause::Card;
  int card_group = 0;
};

/// pypto's lines for a device worker a stalled kernel left unusable (pypto#2396, simpler#1918).
std::vector<FaultPattern> default_poison_patterns();

struct HealthConfig {
  std::vector<FaultPattern> fault_patterns;
  /// `poison-patterns`: lines that say a test found its card's worker unusable (pypto's ChipWorker), each a
  /// regular expression: such a test broke its card for the tests after it (testcases/verdict).
  std::vector<FaultPattern> poison_patterns = default_poison_patterns();
  /// Failures charged to one card within this many minutes, from at least `bad_after_runs` different runs,
  /// make it `bad` (drained with its evidence).
  double window_minutes = 60;
  int bad_after_runs = 2;
  /// The most cards drained automatically at once; past it a card stays `suspect` (and says why).
  int max_auto_drained = 2;
  /// Exit codes that mean "the card or the host failed", not "the test failed" (e.g. a driver error code).
  std::vector<int> infra_exit_codes;
  /// Signals that mean the same (e.g. SIGBUS from a dead card).
  std::vector<int> infra_signals;
  /// A command run before a card that just saw an infrastructure failure is handed out again; `{device}` is
  /// replaced by the card id. Non-zero exit counts as one more infrastructure failure.
  std::string check;
  /// `preflight`: a cheap command run on each of a step's cards before the step (`{device}` its id); one that
  /// fails puts the step back in the queue for other cards, its attempt uncharged, and charges the card.
  std::string preflight;
  /// `reset`: run on a bad card while it is idle, before its probes (e.g. a hot reset: `npu-smi set -t reset -i {device}`).
  std::string reset;
  /// `return-after`: passing probes (`check`) after which a bad card is good again; `probe-interval-seconds` apart.
  int return_after = 3;
  double probe_interval_seconds = 60;
  /// `retire-after`: a card that went bad this many times within 7 days (it passed its probes and failed
  /// again) is `retired`: out of service, never probed again, until a person returns it (0: never).
  int retire_after = 3;
  /// The check is killed (and counts as failed) after this long.
  double check_timeout_seconds = 60;
  /// Consecutive infrastructure failures after which the card is drained.
  int drain_after = 3;
};

/// `source:` — where the commits under test come from. With a repo set, every daemon run is a run of one
/// commit, checked out into its own worktree from a bare mirror (source/git_mirror).
struct SourceConfig {
  std::string repo;    // URL or path; empty: runs use --root as before
  std::string mirror;  // the bare mirror; default <state-dir>/source.git
  bool submodules = true;
  /// `submodule-urls`: what a commit's .gitmodules may name (prefixes); unset: the repository's host
  /// (source/submodule_urls).
  std::optional<std::vector<std::string>> submodule_urls;
  /// Another fetch into the same mirror holds its lock; give up after this long.
  double lock_timeout_seconds = 300;
  double fetch_timeout_seconds = 1800;
  /// Worktrees of this many most recent finished runs are kept (for a look at what ran); older ones are
  /// removed, their logs and records stay until `retention` prunes the run.
  int keep_worktrees = 10;
  bool configured() const { return !repo.empty(); }
};

/// `retention:` — finished runs (record, logs, worktree) older than `max_age_days` or beyond the newest
/// `max_runs` are pruned at start and after each run. 0 disables a bound.
struct RetentionConfig {
  int max_runs = 2000;
  double max_age_days = 90;
};

/// runner.yml `caches:` (docs/maintainers.md, "Caches"): where jobs' named caches live and which run may write
/// which tier. A run of a protected ref reads and writes the protected tier; any other run reads it and writes
/// only its own (a pull request's, a branch's), so nothing a pull request writes is read by main.
struct CachesConfig {
  std::string dir;  // "" = <state-dir>/caches
  /// `protected-refs`: globs (`*` any characters, `/` too); empty = main-branch and GitHub's merge queues.
  std::vector<std::string> protected_refs;
  std::uint64_t max_size = 20ull << 30;  // each cache's tiers, together; least recently used out first
  double pr_max_age_days = 7;            // an unprotected tier unused this long is removed
  /// `group`: the group whose members (a protected run's steps, and nobody else) write the protected tier.
  std::string group = "pto-cache";
  /// `remote: {url, credential-file}`: a ccache cache's protected tier on an HTTP server shared by hosts
  /// (nginx WebDAV); written with the credential (`user:password`) by protected runs only.
  std::string remote_url, remote_credential_file;
  int line = 0, col = 0;  // where runner.yml says `caches:` (0: not at all)
};

/// A muted test (`tests.mute` in runner.yml, or `POST /api/v1/tests/mute`): it still runs and its result is
/// shown, but its failure never makes a step red, through `until` (a UTC date, inclusive).
struct TestMute {
  std::string id;  // a glob over test ids: `*` any run of characters, `?` one; nothing else is special
  std::string reason;
  std::string until;  // YYYY-MM-DD
  std::string by;     // "runner.yml", or who muted it through the API
  std::string at;     // when it was muted through the API (ISO time)
  int line = 0, col = 0;  // where runner.yml says it
  nlohmann::json json() const;
};

/// `tests:` — test history and mutes (SPEC "Test results").
struct TestsConfig {
  std::vector<TestMute> mute;
  int max_muted = 20;         // mutes in force at once (runner.yml's and the API's together)
  double window_days = 14;    // the flip rate of a test on a ref is over this many days
  double retention_days = 30; // test history older than this is pruned
  /// `max-report-bytes`: a step's test reports in all (each file is capped at 64 MiB too); more is refused
  /// before anything is read, the step red ("report refused").
  std::uint64_t max_report_bytes = 256ull << 20;
  /// `max-cases`: test cases a step's reports may name in one attempt (pypto's largest suite has ~750).
  int max_cases = 10000;
};

/// `slurm:` — with `executor: slurm`, each device step is one Slurm job (`srun`), and Slurm picks the node and
/// the cards (slurm/). Card groups are GRES types: `group-types[i]` is the type of `devices.groups[i]`, so a
/// multi-card step asks for `--gres=GRES:TYPE:N` and stays in one group.
struct SlurmConfig {
  std::string partition;           // "" = the cluster's default partition
  std::vector<std::string> args;   // more srun options, e.g. [--account=ci, --qos=npu]
  std::string gres = "npu";        // the GRES name of the cards in gres.conf
  std::vector<std::string> group_types;  // default: g0, g1, ... by group
  double poll_seconds = 1;         // how often squeue is asked while jobs of ours wait or run
  int max_cards = 0;               // cards our jobs in Slurm may ask for at once; 0: the cluster's usable cards
  std::string type_of_group(std::size_t i) const {
    return i < group_types.size() ? group_types[i] : "g" + std::to_string(i);
  }
};

/// `devices.card-files` patterns with `{id}` replaced by card `id`.
std::vector<std::string> card_files_of(const std::vector<std::string>& patterns, int id);

/// `sandbox:` — the unprivileged users a run's steps and leases run as, one lent to each active run (as Nix
/// lends nixbld1..N to builds): `users` is the prefix (pto-step0 .. pto-step{count-1}); `sandbox: off` runs
/// steps as the daemon itself, said loudly.
/// `host: {cpus, memory}`: what the scheduler hands out beside the cards (steps' `cpus:` and `memory:`).
/// Unset: the machine's own (host_budget()).
struct HostBudgetConfig {
  int cpus = 0;              // 0: this machine's online CPUs
  std::uint64_t memory = 0;  // bytes; 0: this machine's MemTotal
};

/// The budget in force: runner.yml's `host:`, else the machine's (sched_getaffinity, /proc/meminfo).
struct HostBudget {
  int cpus = 0;
  std::uint64_t memory = 0;
};
HostBudget host_budget(const HostBudgetConfig& cfg);

struct SandboxConfig {
  bool enabled = true;
  std::string users = "pto-step";
  int count = 32;
  std::vector<std::string> groups;          // supplementary groups of every sandbox user (the cards' group)
  std::uint64_t pids_max = 8192;            // limits of each step's cgroup
  std::uint64_t memory_max = 64ull << 30;
  std::string user(int i) const { return users + std::to_string(i); }
};

/// runner.yml `containment`: each step in its own cgroup v2 where the host allows (else as sweep), or process
/// groups and a /proc sweep of the step's marker.
enum class Containment { Cgroup, Sweep };
/// runner.yml `executor`: this host's cards, or Slurm's (device steps are Slurm jobs).
enum class ExecutorKind { Local, Slurm };
std::string to_string(Containment c);
std::string to_string(ExecutorKind e);

/// One entry of runner.yml `priorities`: runs whose ref matches `ref` (a glob, `*` also across `/`) get
/// `priority`; the first matching entry wins, a ref no entry matches gets 0.
struct PriorityRule {
  std::string ref;
  int priority = 0;
};
/// runner.yml `supersede`: a new run of a pull request cancels the older runs of the same pull request
/// (`pull-request`, the default, as GitLab's auto-cancel of redundant pipelines), or never (`off`).
enum class Supersede { PullRequest, Off };

/// Where on-call hears of what happened (runner.yml `notify:`, notify/): each receiver a Feishu custom bot (signed
/// with its secret), a Slack incoming webhook (blocks) or a plain webhook (a documented JSON body, signed when it
/// has a secret).
enum class NotifyChannel { Feishu, Slack, Webhook };
std::string to_string(NotifyChannel c);

struct NotifyReceiver {
  std::string name;
  NotifyChannel kind = NotifyChannel::Webhook;
  std::string url;          // holds a token for Feishu and Slack: shown as its scheme and host only
  std::string secret_file;  // feishu: the bot's signing secret (required); webhook: signs the body; "" none
  std::vector<std::string> events;  // empty: every event
  std::vector<std::string> refs;    // globs of the refs whose runs it hears of (empty: all); card and queue events always
  /// Its undelivered messages kept at most (a receiver that is down for days): past it the oldest are dropped,
  /// counted in the status and the metrics.
  int max_pending = 1000;
  int line = 0, col = 0;            // where runner.yml defines it
};

struct NotifyConfig {
  std::vector<NotifyReceiver> receivers;
  /// `queue-stuck` when the oldest queue entry has waited this long (once until the queue moves again).
  double queue_stuck_minutes = 60;
  /// Events of one group (a run's red steps, a card's changes) that come within this many seconds of the first
  /// are one message.
  double group_seconds = 5;
  /// A failed delivery is tried again after 1, 2, 4, ... seconds, at most this many apart.
  double retry_max_seconds = 300;
};

/// The events a receiver may ask for (SPEC "On-call hears it first").
const std::vector<std::string>& notify_event_names();

struct RunnerConfig {
  std::string file;  // empty when no runner.yml was read
  std::vector<int> device_ids = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<std::vector<int>> device_groups;
  /// Card types (`devices.type` for every card, `devices.types: {NAME: [ids]}` for some): a step that asks
  /// for a type gets cards of that type only. A card without one is untyped.
  std::string device_type_all;
  std::map<int, std::string> device_types;
  std::string type_of(int card) const;
  /// The most cards one request can get: every card, or the largest group when groups exist.
  int largest_gang() const;
  /// Every type some card of `device_ids` has.
  std::set<std::string> type_names() const;
  /// `devices.card-files`: each card's device file(s), `{id}` its id (Ascend: /dev/davinci{id}). A card whose
  /// file a process outside pto-runner has open (a detached leftover of another tool's task) is not handed out.
  std::vector<std::string> card_files = {"/dev/davinci{id}"};
  /// `devices.shared-files`: control files every step's cards need besides their own.
  std::vector<std::string> shared_files = {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"};
  /// The files of card `id` (card_files with {id} replaced).
  std::vector<std::string> files_of_card(int id) const;
  /// The files of every card (device_ids).
  std::vector<std::string> all_card_files() const;
  std::string lock_dir = "/var/lock/pto-runner";
  std::string lock_name = "npu-{id}.lock";  // devices.lock-name: the flock file of each card
  std::string state_dir = ".pto-runner";
  std::string cache_dir = "~/.cache/pto-runner";
  std::string toolchain_mirror;
  std::string listen = "127.0.0.1:8787";
  /// `steps-listen`: where the run's steps reach the daemon (their task-submit calls), always loopback plain
  /// HTTP. Port 0 (the default): any free port, taken again at each start (`<state-dir>/steps-endpoint-port`);
  /// a fixed port where a systemd socket unit holds it (packaging/pto-runner-steps.socket).
  std::string steps_listen = "127.0.0.1:0";
  /// `listen-unix`: the API on this Unix socket too; `submit-group`: its members are local submitters there
  /// (server/local_socket, server/access). Neither by default.
  std::string listen_unix;
  std::string submit_group;
  std::string token_file;
  /// `read-token-file`: with a `listen` that is not loopback every GET needs a token: this one (a reader's) or
  /// the admin token.
  std::string read_token_file;
  /// `tls: {cert, key}` (PEM files) for a `listen` that is not loopback; `insecure-listen: true` allows plain
  /// HTTP there instead (warned about at start).
  std::string tls_cert, tls_key;
  bool insecure_listen = false;
  /// `max-connections-per-client`: open connections of one client address (or socket uid).
  int max_connections_per_client = 64;
  /// `request-timeout-seconds`: a connection that sends no complete request within it is closed.
  double request_timeout_seconds = 10;
  /// `max-cards-per-run`: the most cards one run's leases (its harness's task-submit) hold or wait for at
  /// once; 0: every card.
  int max_cards_per_run = 0;
  double kill_grace_seconds = 10;
  /// `shutdown-timeout-minutes`: how long SIGTERM's drain waits for accepted runs before cancelling them.
  double shutdown_timeout_minutes = 60;
  /// `log-max-mb`: a step's log keeps at most this much (its head, and its last MiB); 0: no cap.
  std::uint64_t log_max_bytes = 128ull << 20;
  /// `containment`: "cgroup" (each step in its own cgroup v2 where the host allows, else as "sweep") or
  /// "sweep" (process group + /proc marker sweep only).
  Containment containment = Containment::Cgroup;
  /// `executor`: "local" (this host's cards, the embedded default) or "slurm" (device steps are Slurm jobs).
  ExecutorKind executor = ExecutorKind::Local;
  /// `supervise`: a daemon's steps are held by the host's step supervisor and outlive the daemon (true, the
  /// default: supervise/); false: they are the daemon's children and end `interrupted` with it.
  bool supervise = true;
  /// `env` and `env-file` (KEY=VALUE lines, a GitHub runner's .env): the host's environment for every step,
  /// under the job's and the step's own. `env` wins over the file; `env_file` is the file's path as written.
  std::map<std::string, std::string> env;
  std::string env_file;
  SandboxConfig sandbox;
  HostBudgetConfig host;
  /// Given: the main branch and merge queues (GitHub's gh-readonly-queue/*) above everything else.
  std::vector<PriorityRule> priorities = {{"refs/heads/main", 10}, {"refs/heads/gh-readonly-queue/*", 10}};
  /// The priority of a run of `ref` and the rule that gave it ("" when none matched).
  std::pair<int, std::string> priority_of(const std::string& ref) const;
  Supersede supersede = Supersede::PullRequest;
  SlurmConfig slurm;
  HealthConfig health;
  SourceConfig source;
  RetentionConfig retention;
  CachesConfig caches;
  /// `reuse: {max-age-days}`: how old a green result may be and still stand in for a step (reuse/).
  double reuse_max_age_days = 7;
  TestsConfig tests;
  NotifyConfig notify;
  /// `main-branch`: the ref whose red runs are `main-red` (and whose steps that ran no tests the alerts count).
  std::string main_ref = "refs/heads/main";
  /// Whether a run of `ref` writes the protected tier of the caches (caches.protected-refs).
  bool protected_ref(const std::string& ref) const;
};

/// YYYY-MM-DD naming a real day.
bool is_utc_date(const std::string& s);


RunnerConfig load_runner_config(const std::string& path, const std::string& display, Diagnostics& diags);

/// Expands a leading `~/` with $HOME.
std::string expand_home(const std::string& path);

}  // namespace pto
