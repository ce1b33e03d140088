#pragma once
// WalCheckpointer: the journal's checkpoints (the WAL copied back into the database file, with an fdatasync of
// each) made on a thread of their own, not inside a commit of the daemon's thread.
//
// Left to SQLite, the commit that takes the WAL past 1,000 pages runs the checkpoint itself: on the engine's
// thread, every few hundred step transitions, a stall of 10-80 ms in which no ended step is answered and no
// card is handed on. Here the writer's connection only reports its WAL's size after each commit (a WAL hook);
// past `threshold` pages it wakes this thread, which checkpoints from its own connection (PASSIVE: it never
// waits for, nor blocks, the writer). A WAL that still grows past `cap` pages (a writer that never pauses long
// enough for the copy to catch up) is checkpointed by the writer itself, as SQLite would have.
#include <sqlite3.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace pto {

class WalCheckpointer {
 public:
  static constexpr int kThresholdPages = 1000;  // SQLite's own autocheckpoint point
  static constexpr int kCapPages = 16000;       // ~64 MB of WAL: the writer checkpoints itself past this

  /// Takes over the checkpoints of `writer` (a connection to `path`, used on one thread): null with `error` when
  /// the file cannot be opened a second time (the writer then keeps SQLite's own checkpoints).
  static std::unique_ptr<WalCheckpointer> start(const std::string& path, sqlite3* writer, std::string& error,
                                                int threshold = kThresholdPages, int cap = kCapPages);
  /// Stops the thread (a checkpoint under way finishes first) and gives the writer SQLite's own checkpoints back.
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  /// Checkpoints made by this thread, and by the writer past the cap (for tests and the bench).
  int checkpoints() const;
  int writer_checkpoints() const;
  /// Waits until no checkpoint is due or under way (tests).
  void wait_idle();

 private:
  WalCheckpointer(sqlite3* own, sqlite3* writer, int threshold, int cap);
  static int on_commit(void* self, sqlite3* db, const char* name, int pages);
  void loop();
  bool due() const;  // with m_ held

  sqlite3* own_;     // this thread's connection
  sqlite3* writer_;  // the connection whose commits report here
  const int threshold_, cap_;
  mutable std::mutex m_;
  std::condition_variable wake_, idle_;
  int pages_ = 0;       // the WAL's size after the writer's last commit
  int copied_ = 0;      // the WAL's frames the last checkpoint copied (a WAL restarted since holds fewer)
  bool running_ = false, stop_ = false;
  int checkpoints_ = 0, writer_checkpoints_ = 0;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace pto
