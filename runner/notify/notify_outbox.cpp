#include "notify/notify_outbox.h"

#include <sqlite3.h>

#include "store/side_table.h"

namespace pto {

namespace {

const char* const kSchema[] = {
    "CREATE TABLE IF NOT EXISTS notify_outbox(id INTEGER PRIMARY KEY AUTOINCREMENT, receiver TEXT NOT NULL, grp TEXT NOT NULL,"
    " event TEXT NOT NULL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, maybe_sent INTEGER NOT NULL DEFAULT 0,"
    " delivered REAL, error TEXT)",
    "CREATE INDEX IF NOT EXISTS notify_outbox_pending ON notify_outbox(receiver, id) WHERE delivered IS NULL",
};

}  // namespace

std::unique_ptr<NotifyOutbox> NotifyOutbox::open(const std::string& path, std::string& error) {
  sqlite3* db = open_side_connection(path, "the notification outbox", {std::begin(kSchema), std::end(kSchema)}, error);
  return db ? std::unique_ptr<NotifyOutbox>(new NotifyOutbox(db)) : nullptr;
}

NotifyOutbox::~NotifyOutbox() { sqlite3_close(db_); }

template <typename F>
bool NotifyOutbox::write(F&& f) {
  return side_transaction(db_, error_, "notification outbox", std::forward<F>(f));
}

bool NotifyOutbox::add(const NotifyEvent& event, const std::vector<std::pair<std::string, int>>& receivers, double now,
                       std::map<std::string, long long>& dropped) {
  if (receivers.empty()) return true;
  const std::string text = event.json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return write([&] {
    Stmt s(db_, "INSERT INTO notify_outbox(receiver, grp, event, created) VALUES(?, ?, ?, ?)");
    // A receiver's backlog is bounded: past its max-pending the oldest undelivered rows go.
    Stmt cap(db_, "DELETE FROM notify_outbox WHERE receiver = ?1 AND delivered IS NULL AND id <= (SELECT id FROM notify_outbox "
                  "WHERE receiver = ?1 AND delivered IS NULL ORDER BY id DESC LIMIT 1 OFFSET ?2)");
    for (const auto& [r, max_pending] : receivers) {
      s.reset().bind(1, r).bind(2, event.group).bind(3, text).bind(4, now);
      s.step();
      cap.reset().bind(1, r).bind(2, max_pending);
      cap.step();
      if (const int n = sqlite3_changes(db_); n > 0) dropped[r] += n;
    }
  });
}

long long NotifyOutbox::pending_count(const std::string& receiver) {
  try {
    Stmt s(db_, "SELECT count(*) FROM notify_outbox WHERE receiver = ? AND delivered IS NULL");
    s.bind(1, receiver);
    return s.step() ? s.integer(0) : 0;
  } catch (const std::exception& e) {
    error_ = std::string("notification outbox: ") + e.what();
    return 0;
  }
}

std::vector<OutboxEntry> NotifyOutbox::pending(const std::string& receiver, int limit) {
  std::vector<OutboxEntry> out;
  try {
    Stmt s(db_, "SELECT id, event, created, attempts, maybe_sent FROM notify_outbox WHERE receiver = ? AND delivered IS NULL ORDER BY id LIMIT ?");
    s.bind(1, receiver).bind(2, limit);
    while (s.step()) {
      OutboxEntry e;
      e.id = s.integer(0);
      e.receiver = receiver;
      nlohmann::json j = nlohmann::json::parse(s.text(1), nullptr, false);
      if (!j.is_discarded()) e.event = NotifyEvent::from_json(j);
      e.created = s.real(2);
      e.attempts = static_cast<int>(s.integer(3));
      e.maybe_sent = s.integer(4) != 0;
      out.push_back(std::move(e));
    }
    error_.clear();
  } catch (const std::exception& e) {
    error_ = std::string("notification outbox: ") + e.what();
  }
  return out;
}

bool NotifyOutbox::sending(const std::vector<long long>& ids) {
  return write([&] {
    Stmt s(db_, "UPDATE notify_outbox SET attempts = attempts + 1, maybe_sent = 1 WHERE id = ?");
    for (long long id : ids) s.reset().bind(1, id).step();
  });
}

bool NotifyOutbox::failed(const std::vector<long long>& ids, const std::string& error, bool maybe_sent) {
  return write([&] {
    Stmt s(db_, "UPDATE notify_outbox SET maybe_sent = ?, error = ? WHERE id = ?");
    for (long long id : ids) s.reset().bind(1, maybe_sent ? 1 : 0).bind(2, error).bind(3, id).step();
  });
}

bool NotifyOutbox::delivered(const std::vector<long long>& ids, double now) {
  return write([&] {
    Stmt s(db_, "UPDATE notify_outbox SET delivered = ?, maybe_sent = 0, error = NULL WHERE id = ?");
    for (long long id : ids) s.reset().bind(1, now).bind(2, id).step();
  });
}

bool NotifyOutbox::prune_delivered(double before) {
  return write([&] {
    Stmt d(db_, "DELETE FROM notify_outbox WHERE delivered IS NOT NULL AND delivered < ?");
    d.bind(1, before).step();
  });
}

bool NotifyOutbox::drop_unconfigured(const std::vector<std::string>& receivers) {
  return write([&] {
    std::string known;
    for (std::size_t i = 0; i < receivers.size(); ++i) known += i ? ", ?" : "?";
    const std::string sql = "DELETE FROM notify_outbox WHERE delivered IS NULL" + (known.empty() ? std::string() : " AND receiver NOT IN (" + known + ")");
    Stmt g(db_, sql.c_str());
    for (std::size_t i = 0; i < receivers.size(); ++i) g.bind(static_cast<int>(i) + 1, receivers[i]);
    g.step();
  });
}

}  // namespace pto
