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
// One connection per thread: the daemon's engine thread adds, the notifier's thread reads and marks. Calls
// never throw (false or empty, with the reason in error()).
#include <map>
#include <memory>
#include <string>
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

  /// `event` kept for each of `receivers`, in one transaction.
  bool add(const NotifyEvent& event, const std::vector<std::string>& receivers, double now);
  /// The receiver's undelivered events, oldest first (at most `limit`).
  std::vector<OutboxEntry> pending(const std::string& receiver, int limit);
  /// An attempt of these rows starts / failed (`maybe_sent`: its answer never came) / was taken.
  bool sending(const std::vector<long long>& ids);
  bool failed(const std::vector<long long>& ids, const std::string& error, bool maybe_sent);
  bool delivered(const std::vector<long long>& ids, double now);
  /// Undelivered rows by receiver.
  std::map<std::string, long long> pending_counts();
  /// Delivered rows older than `before`, and undelivered ones of receivers no longer configured.
  bool prune(double before, const std::vector<std::string>& receivers);
  const std::string& error() const { return error_; }

 private:
  explicit NotifyOutbox(sqlite3* db) : db_(db) {}
  template <typename F>
  bool write(F&& f);
  sqlite3* db_;
  std::string error_;
};

}  // namespace pto
