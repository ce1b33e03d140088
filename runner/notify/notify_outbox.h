#pragma once
// The outbox: every event for every receiver that wants it, kept in the journal's SQLite file (its own table and
// connection) until the receiver has taken it, so delivery is at least once across restarts and crashes.
//
// A row is written when the event happens (on the engine thread, before anything is sent), marked `maybe_sent`
// just before an attempt and cleared when the attempt failed for sure (no connection, an HTTP error): a row
// still marked when a daemon starts was being sent when the last one died, and is sent again marked as a
// possible duplicate. Rows leave in id order per receiver, so a receiver sees events in the order they
// happened. Delivered rows are kept 7 days.
//
// One connection per thread: the daemon's engine thread adds, each receiver's sender thread reads and marks its
// own rows. Calls
// never throw (false or empty, with the reason in error()).
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "notify/notify_message.h"

struct sqlite3;

namespace pto {

class NotifyOutbox {
 public:
  static std::unique_ptr<NotifyOutbox> open(const std::string& path, std::string& error);
  ~NotifyOutbox();
  NotifyOutbox(const NotifyOutbox&) = delete;
  NotifyOutbox& operator=(const NotifyOutbox&) = delete;

  /// `event` kept for each of `receivers` (name, max-pending), in one transaction; a receiver's oldest
  /// undelivered rows past its max-pending are dropped, counted into `dropped` by receiver.
  bool add(const NotifyEvent& event, const std::vector<std::pair<std::string, int>>& receivers, double now,
           std::map<std::string, long long>& dropped);
  /// The receiver's undelivered events, oldest first (at most `limit`).
  std::vector<OutboxEntry> pending(const std::string& receiver, int limit);
  /// An attempt of these rows starts / failed (`maybe_sent`: its answer never came) / was taken.
  bool sending(const std::vector<long long>& ids);
  bool failed(const std::vector<long long>& ids, const std::string& error, bool maybe_sent);
  bool delivered(const std::vector<long long>& ids, double now);
  /// The receiver's undelivered rows.
  long long pending_count(const std::string& receiver);
  /// Delivered rows older than `before`.
  bool prune_delivered(double before);
  /// Undelivered rows of receivers not among `receivers` (no longer configured).
  bool drop_unconfigured(const std::vector<std::string>& receivers);
  const std::string& error() const { return error_; }

 private:
  explicit NotifyOutbox(sqlite3* db) : db_(db) {}
  template <typename F>
  bool write(F&& f);
  sqlite3* db_;
  std::string error_;
};

}  // namespace pto
