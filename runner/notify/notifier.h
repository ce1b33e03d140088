#pragma once
// Notifier: delivers the outbox (notify/notify_outbox) to runner.yml's receivers on a thread of its own, so no
// receiver ever holds up the engine. The engine thread hands it events (notify()): each is written to the outbox
// for every receiver that wants it before notify() returns, then the sender is woken.
//
// Per receiver, in the order of their first events: the oldest undelivered event and those of its group that
// came within notify.group-seconds of it (waiting that long for them) become one message (notify/notify_message), POSTed
// with libcurl (5 s to connect, 10 s in all). A failure (no connection, an HTTP error, Feishu's non-zero
// `code`) is retried after 1, 2, 4, ... seconds up to notify.retry-max-seconds, the later events of that
// receiver waiting behind it (order), the others going on. The status (failing since, last error, pending)
// is what the read model shows and /metrics counts.
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/runner_config.h"
#include "notify/notify_event.h"
#include "notify/receiver_status.h"

namespace pto {

class NotifyOutbox;

class Notifier {
 public:
  /// `journal`: the journal's SQLite file (the outbox's table lives there); `host`: this host's name;
  /// `changed`: called on the sender's thread when what status() says changed.
  Notifier(std::string journal, NotifyConfig cfg, std::string host, std::function<void()> changed);
  ~Notifier();
  /// Opens the outbox and starts the sender. "" or the problem (the daemon then runs without notifications).
  std::string start();
  /// Engine thread: keeps `e` for each receiver that wants it, then wakes the sender. False when the outbox
  /// could not take it (the reason in the log and the status).
  bool notify(const NotifyEvent& e);
  /// SIGHUP: the new receivers, thresholds and grouping; pending events of removed receivers are dropped.
  void reconfigure(NotifyConfig cfg);
  std::vector<ReceiverStatus> status() const;
  double queue_stuck_minutes() const;

 private:
  struct State {
    int failures_in_row = 0;
    double next_try = 0;
    ReceiverStatus shown;
    std::string last_shown;  // what status() said at the last pass: a change is told (changed_)
    int generation = 0;      // bumped by a reload: a delivery that began before it leaves its retry timing alone
  };
  void run();
  /// One pass over the receivers; returns when it next needs to look (seconds since the epoch).
  double pass();
  /// Sends `receiver`'s next message, if one is due; `wake` lowered to when it next must look.
  void deliver(const NotifyReceiver& receiver, State& st, double now, double& wake);

  std::string journal_, host_;
  std::function<void()> changed_;
  mutable std::mutex mutex_;  // guards cfg_, states_, stop_, poked_
  std::condition_variable cv_;
  NotifyConfig cfg_;
  std::map<std::string, State> states_;
  bool stop_ = false, poked_ = false;
  std::unique_ptr<NotifyOutbox> adder_;   // the engine thread's connection
  std::unique_ptr<NotifyOutbox> sender_;  // the sender thread's
  std::thread thread_;
};

}  // namespace pto
