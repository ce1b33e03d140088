#pragma once
// DevicePool: the cards of this host, who holds each, their flock locks, and their health.
//
// The pool is the only owner of card state. The engine asks it for a scheduler snapshot, tells it which
// cards a step got (acquire: flock, all or nothing) and when the step's processes are gone (release).
// Health (as LAVA's devices): each card is `good`, `suspect` (a failure was charged to it), `bad` (failures
// charged to it from at least `health.bad-after-runs` runs within `health.window-minutes`, or `drain-after`
// infrastructure failures in a row: drained automatically, with its evidence, at most
// `health.max-auto-drained` at once), `probing` (a bad card under its health check), `retired` (bad for the
// `health.retire-after`th time in 7 days: its probes pass but it fails again; never probed again, it counts
// against max-auto-drained until a person returns it) or `maintenance` (drained by a person: never undone
// automatically).
// Drained cards and their evidence persist in <state-dir>/devices.json, so the next run (or the daemon after
// a restart) keeps them out too.
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "sched/card_lock.h"
#include "sched/scheduler.h"
#include "util/iso_time.h"

namespace pto {

enum class CardState { Free, Busy, Reserved, Drained };
std::string to_string(CardState s);
enum class CardHealth { Good, Suspect, Bad, Probing, Maintenance, Retired };
std::string to_string(CardHealth h);

struct CardStatus {
  int id = 0;
  CardState state = CardState::Free;
  std::string holder;        // step label, or who outside uses it ("another program holds LOCK (pid=...)", "pid N (x) has F open")
  bool held_outside = false;  // locked by another process
  std::string since;          // ISO time the state began
  std::string held_since;     // ISO time the current holding began ("" when not held by pto-runner): a drain
                              // of a busy card moves `since`, never this
  std::string drain_reason;
  int consecutive_infra_failures = 0;
  std::vector<int> group;
  std::string type;  // "" untyped
  std::string lock_file;
  double busy_seconds = 0;  // held by pto-runner since the daemon started, the current holding included
  CardHealth health = CardHealth::Good;
  std::vector<std::string> evidence;  // the failures charged to it within the window: "RUN at TIME: WHAT"
};

class DevicePool {
 public:
  /// Whether a card let go of moments ago is scanned for outside users too (yes, unless every step runs in a
  /// cgroup it cannot leave: without one, a step's escaped process may still hold the card's file open).
  void set_scan_at_hand_over(bool scan) { scan_at_hand_over_ = scan; }
  DevicePool(const RunnerConfig& cfg, std::string state_dir);

  /// Creates the lock dir and loads drained cards. Returns "" or the problem.
  std::string init();

  /// Locks every card of `cards` (ascending) for `label`, all or nothing. On failure returns false and
  /// remembers which cards another process holds or has open (busy for the scheduler until refresh_outside()).
  /// A card whose flock is free but whose device file a process outside pto-runner has open (devices.card-files)
  /// is not handed out either.
  bool acquire(const std::vector<int>& cards, const std::string& label, double expected_end, std::string& why);
  void release(const std::vector<int>& cards);
  /// Cards a step held while no daemon ran (its supervisor kept their flocks): held again by this pool for
  /// `label`, on `fds` (one per card, in order; a card without one is locked afresh, or held on trust when
  /// another process has it: the step that runs on it is ours).
  void adopt(const std::vector<int>& cards, const std::vector<int>& fds, const std::string& label);
  /// The descriptors of the flocks this pool holds on `cards` (those it holds).
  std::vector<int> lock_fds(const std::vector<int>& cards) const;
  /// Says who holds a card now (a health check after the step that held it); the lock stays.
  void relabel(int card, const std::string& label);

  /// Re-checks cards last seen locked by another process. Returns true if any came free.
  bool refresh_outside();
  /// A daemon's watch of the cards it does not hold, also while nobody waits: a card another program has
  /// flocked (read from /proc/locks: the lock is never touched) and, with `scan_files`, one whose files a
  /// process outside pto-runner has open (a pass over /proc). True when it found a new one.
  bool watch_outside(bool scan_files);
  bool any_held_outside() const;

  std::vector<SchedCard> snapshot() const;
  const std::vector<std::vector<int>>& groups() const { return groups_; }
  std::vector<CardStatus> status(const std::map<int, std::uint64_t>& reserved = {}) const;

  /// Records a step's end on its cards. Returns the cards this drained.
  std::vector<int> record_result(const std::vector<int>& cards, bool infra_failure, const std::string& what);
  /// A person's drain (maintenance): only a person's undrain returns it.
  void drain(int card, const std::string& reason);
  /// A failure of `run` charged to `card` (`what`: the fault pattern or reason). Returns the card's note for
  /// the verdict: "card 3 drained (3 failures in 2 runs in 4 min; 507018)", "card 3 suspect (1 failure in 1
  /// run; 507018)". `now` is seconds since the epoch (charges outlive the process's steady clock).
  std::string charge(int card, const std::string& run, const std::string& what, double now);
  /// What `card` did to other runs than `run` within the window ("" nothing): a plain failure there is the card's.
  std::string failing_elsewhere(int card, const std::string& run, double now) const;
  /// Bad cards nothing holds: what the prober (host/card_prober) may probe now.
  std::vector<int> idle_bad_cards() const;
  /// A probe of a bad card starts (it is `probing`) and ends: a pass counts towards health.return-after
  /// passes in a row, after which the card is good and in service again (returns true); a failure makes it
  /// bad again and starts the count over.
  void probe_started(int card);
  bool probe_ended(int card, bool passed);
  /// SIGHUP: takes the cards, groups, types and drain-after of a reloaded runner.yml. A card no longer listed
  /// is dropped when free, drained when busy. Returns what changed, one line each.
  std::vector<std::string> reconfigure(const RunnerConfig& cfg);
  bool undrain(int card);
  /// Told when a card goes bad or retired (drained by its failures, `why` its evidence) and when a drained card
  /// is back in service (good: its probes passed, or a person's undrain). Called on the pool's thread.
  void set_on_health(std::function<void(int card, CardHealth from, CardHealth to, const std::string& why)> f) { on_health_ = std::move(f); }
  bool is_drained(int card) const;
  bool has_card(int card) const { return cards_.count(card) > 0; }
  const std::string& lock_dir() const { return lock_dir_; }
  const std::string& lock_name() const { return lock_name_; }

 private:
  struct Card {
    std::optional<CardLock> lock;
    std::string holder;
    std::string outside_holder;
    double expected_end = 0;
    std::string since;
    bool drained = false;
    std::string drain_reason;
    int failures = 0;
    std::string type;
    std::vector<std::string> files;                   // devices.card-files of this card
    double busy_seconds = 0;                          // finished holdings
    CardHealth health = CardHealth::Good;
    struct Charge {
      double at;  // seconds since the epoch
      std::string run, what;
    };
    std::deque<Charge> charges;  // within the window
    int probes_passed = 0;       // in a row, while bad
    std::deque<double> bad_spells;  // when it was drained bad (seconds since the epoch), within 7 days
    std::chrono::steady_clock::time_point held_since;  // of the current holding
    std::string held_since_iso;                         // the same, as the pages show it
    std::chrono::steady_clock::time_point released_at;  // when we last let it go
    std::chrono::steady_clock::time_point scanned_at;   // when a /proc scan last found its files unused
  };
  /// Under cgroup containment, a card we let go of moments ago is handed straight on without reading /proc for
  /// its files' users: only what ran under our own lock could have opened it meanwhile, and that is contained
  /// and gone (a scan costs ~1 ms per grant on a busy host, bench/README.md). Cards idle longer, or last held
  /// by someone else, are scanned.
  static constexpr std::chrono::milliseconds kHandOver{2000};
  /// A scan of /proc for one card's files looks for every other idle card's too (a pass costs the same for one
  /// file or eight): a run's first steps, granted all cards in one burst, read /proc once, not once a card. A
  /// card found unused is granted without another scan this soon after.
  static constexpr std::chrono::milliseconds kScanFresh{100};
  static constexpr double kRetireWindowSeconds = 7 * 86400;
  bool scan_at_hand_over_ = true;
  /// Who outside pto-runner uses each of `ids` now (its lock's holder, or a process with its files open);
  /// cards nobody outside uses are left out.
  std::map<int, std::string> outside_users(const std::vector<int>& ids) const;
  /// How a card locked by another program is shown: the lock file and its holder line.
  std::string locked_by(int id, const std::string& holder) const;
  /// After an acquire failed on one card: every other card we do not hold that is in use outside too, so the
  /// status names each of them (not only the first one found) and no reservation is made on them.
  void probe_outside();
  void save_drained() const;
  void load_drained();

  std::map<int, Card> cards_;
  std::vector<std::vector<int>> groups_;
  std::string lock_dir_;
  std::string lock_name_;
  std::string state_file_;
  int drain_after_ = 3;
  HealthConfig health_;
  std::function<void(int, CardHealth, CardHealth, const std::string&)> on_health_;
  /// Drops charges older than the window; a suspect card with none left is good again.
  void age_charges(Card& c, double now) const;
  int auto_drained() const;
  /// Drains a card automatically (bad), unless max-auto-drained are already: then "" and it stays suspect.
  bool drain_bad(int card, const std::string& reason);
};

/// The lock directory to use: the configured one, or a per-user one under /tmp when the configured default
/// (/var/lock/pto-runner) cannot be created by this user.
std::string resolve_lock_dir(const std::string& configured);

}  // namespace pto
