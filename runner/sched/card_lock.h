#pragma once
// CardLock: one NPU card held as an exclusive flock(2) on <lock-dir>/<name>, name `npu-{id}.lock` unless
// runner.yml `devices.lock-name` says otherwise (`npu_device_{id}.lock`: the incumbent task-submit's, so both
// can run on one host during a migration without ever sharing a card).
//
// flock is what lets two runners, or a runner and another tool (task-submit, a person with a script), share a
// host without sharing a card. The holder writes its pid and label into the file so a waiting step can say
// who has the card. The kernel drops the lock when the fd closes, including when the holder dies.
#include <optional>
#include <set>
#include <string>

namespace pto {

class CardLock {
 public:
  /// Non-blocking. On failure returns nothing and, when another process holds it, describes the holder in
  /// `holder` ("pid=1234 (pypto-ci / moe)"); `error` is set for real errors (lock dir unwritable).
  static std::optional<CardLock> try_acquire(const std::string& dir, int card, const std::string& label,
                                             std::string& holder, std::string& error,
                                             const std::string& name = kDefaultName);
  /// Whether someone else holds the card's lock right now (and who), without keeping it.
  static bool held_elsewhere(const std::string& dir, int card, std::string& holder, const std::string& name = kDefaultName);
  /// The same without touching the lock (a watcher must never make another tool's flock fail for an
  /// instant): whether card's lock file is among `flocked` (flocked_files()), and its holder line.
  static bool seen_held(const std::string& dir, int card, const std::string& name, const std::set<std::string>& flocked, std::string& holder);
  /// Every file flock'ed on the host now, as "MAJOR:MINOR:INODE" (/proc/locks, one read).
  static std::set<std::string> flocked_files();
  static std::string path_for(const std::string& dir, int card, const std::string& name = kDefaultName);
  static constexpr const char* kDefaultName = "npu-{id}.lock";

  /// The descriptor its flock lives on: one passed to another process (a step's supervisor) keeps the lock as
  /// long as that process keeps it open, even when this one is gone.
  int fd() const { return fd_; }
  /// A descriptor whose flock already holds `card` (one a step's supervisor kept while no daemon ran, passed
  /// back to the next daemon): the lock is this object's from now on.
  static CardLock adopt(int fd, int card) { return CardLock(fd, card); }
  CardLock(CardLock&& o) noexcept : fd_(o.fd_), card_(o.card_) { o.fd_ = -1; }
  CardLock& operator=(CardLock&& o) noexcept;
  CardLock(const CardLock&) = delete;
  CardLock& operator=(const CardLock&) = delete;
  ~CardLock();
  int card() const { return card_; }

 private:
  CardLock(int fd, int card) : fd_(fd), card_(card) {}
  int fd_ = -1;
  int card_ = -1;
};

}  // namespace pto
