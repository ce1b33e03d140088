#include "store/wal_checkpointer.h"

namespace pto {

std::unique_ptr<WalCheckpointer> WalCheckpointer::start(const std::string& path, sqlite3* writer, std::string& error, int threshold,
                                                        int cap) {
  sqlite3* own = nullptr;
  if (sqlite3_open_v2(path.c_str(), &own, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    error = "cannot open " + path + " for its checkpoints: " + (own ? sqlite3_errmsg(own) : "out of memory");
    sqlite3_close(own);
    return nullptr;
  }
  // A connection knows its file is in WAL mode only once it has read it: before that a checkpoint copies nothing.
  if (sqlite3_exec(own, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) != SQLITE_OK) {
    error = "cannot read " + path + " for its checkpoints: " + sqlite3_errmsg(own);
    sqlite3_close(own);
    return nullptr;
  }
  return std::unique_ptr<WalCheckpointer>(new WalCheckpointer(own, writer, threshold, cap));
}

WalCheckpointer::WalCheckpointer(sqlite3* own, sqlite3* writer, int threshold, int cap)
    : own_(own), writer_(writer), threshold_(threshold), cap_(cap), thread_([this] { loop(); }) {
  // The hook replaces SQLite's autocheckpoint (both are the one WAL hook of the connection).
  sqlite3_wal_hook(writer_, &WalCheckpointer::on_commit, this);
}

WalCheckpointer::~WalCheckpointer() {
  sqlite3_wal_autocheckpoint(writer_, kThresholdPages);  // the writer's own checkpoints again, our hook gone
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  sqlite3_close(own_);
}

int WalCheckpointer::on_commit(void* self, sqlite3* db, const char* name, int pages) {
  auto* c = static_cast<WalCheckpointer*>(self);
  bool wake = false;
  {
    std::lock_guard<std::mutex> l(c->m_);
    if (pages < c->copied_) c->copied_ = 0;  // the WAL started over since the last copy
    c->pages_ = pages;
    wake = c->due() && !c->running_;
    if (pages >= c->cap_) ++c->writer_checkpoints_;
  }
  if (pages >= c->cap_) sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  if (wake) c->wake_.notify_one();
  return SQLITE_OK;
}

bool WalCheckpointer::due() const {
  // Past the threshold, and a quarter of it new since the last copy (a writer that never pauses leaves a few
  // frames behind each copy; those wait for more, not a checkpoint each).
  return pages_ >= threshold_ && pages_ - copied_ >= threshold_ / 4;
}

void WalCheckpointer::loop() {
  std::unique_lock<std::mutex> l(m_);
  while (true) {
    wake_.wait(l, [&] { return stop_ || due(); });
    if (stop_) break;
    running_ = true;
    l.unlock();
    int log = 0, copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(own_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    l.lock();
    running_ = false;
    ++checkpoints_;
    // A copy that failed (the disk, or the writer checkpointing past the cap) is tried again once the WAL has
    // grown by a quarter of the threshold, not at once.
    copied_ = rc == SQLITE_OK && copied >= 0 ? copied : pages_;
    idle_.notify_all();
  }
  running_ = false;
  idle_.notify_all();
}

int WalCheckpointer::checkpoints() const {
  std::lock_guard<std::mutex> l(m_);
  return checkpoints_;
}

int WalCheckpointer::writer_checkpoints() const {
  std::lock_guard<std::mutex> l(m_);
  return writer_checkpoints_;
}

void WalCheckpointer::wait_idle() {
  std::unique_lock<std::mutex> l(m_);
  idle_.wait(l, [this] { return stop_ || (!running_ && !due()); });
}

}  // namespace pto
