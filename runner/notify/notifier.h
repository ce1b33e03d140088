#pragma once
// Notifier: delivers the outbox (notify/notify_outbox) to runner.yml's receivers, each receiver on a sender
// thread of its own, so no receiver ever holds up the engine, and a receiver that hangs, drips or fails holds up
// only itself (SPEC "A step cannot take the daemon's place": another receiver still gets its message within
// seconds). The engine thread hands it events (notify()): each is written to the outbox for every receiver
// that wants it before notify() returns, then those receivers' senders are woken. A receiver's undelivered
// events are bounded (`max-pending`, default 1,000): past it the oldest are dropped and counted.
//
// Per receiver, in the order of their first events: the oldest undelivered event and those of its group that
// came within notify.group-seconds of it (waiting that long for them) become one message (notify/notify_message), POSTed
// with libcurl (5 s to connect, 10 s in all). A failure (no connection, an HTTP error, Feishu's non-zero
// `code`) is retried after 1, 2, 4, ... seconds up to notify.retry-max-seconds, the later events of that
// receiver waiting behind it (order). The status (failing since, last error, pending, dropped) is what the
// read model shows and /metrics counts.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "notify/notify_event.h"
#include "read_model/receiver_status.h"

namespace pto {

class NotifyOutbox;

class Notifier {
 public:
  /// `journal`: the journal's SQLite file (the outbox's table lives there); `host`: this host's name;
  /// `changed`: called on a sender's thread when what status() says changed.
  Notifier(std::string journal, NotifyConfig cfg, std::string host, std::function<void()> changed);
  ~Notifier();
  /// Opens the outbox and starts the senders. "" or the problem (the daemon then runs without notifications).
  std::string start();
  /// Engine thread: keeps `e` for each receiver that wants it, then wakes their senders. False when the outbox
  /// could not take it (the reason in the log and the status).
  bool notify(const NotifyEvent& e);
  /// SIGHUP: the new receivers, thresholds and grouping; pending events of removed receivers are dropped.
  void reconfigure(NotifyConfig cfg);
  std::vector<ReceiverStatus> status() const;
  double queue_stuck_minutes() const;

  struct Sender;  // one receiver's thread, its outbox connection and its retry state (notifier.cpp)

 private:
  /// A sender for `r`; "" or why its outbox connection could not be opened.
  std::string add_sender(const NotifyReceiver& r);

  std::string journal_, host_;
  std::function<void()> changed_;
  mutable std::mutex mutex_;  // guards cfg_, senders_, retired_
  NotifyConfig cfg_;
  std::map<std::string, std::unique_ptr<Sender>> senders_;
  std::vector<std::unique_ptr<Sender>> retired_;  // removed by a reload, finishing what they were sending
  std::unique_ptr<NotifyOutbox> adder_;           // the engine thread's connection
};

}  // namespace pto
