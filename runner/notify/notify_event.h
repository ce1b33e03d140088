#pragma once
// What on-call is told (SPEC "On-call hears it first"): one event per thing that happened, made on the engine
// thread by the daemon (daemon/daemon_notify.cpp), kept in the outbox (notify/notify_outbox) for every receiver
// that asked for it, and delivered by the notifier (notify/notifier), grouped with the events of the same
// `group` that came within runner.yml notify.group-seconds of the first (a run's red steps, a card's changes).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/runner_config.h"

namespace pto {

struct NotifyEvent {
  std::string kind;   // one of notify_event_names(): card-bad, main-red, ...
  std::string group;  // events of one group go out as one message: "run:ID", "card:3", "queue"
  std::string ref;    // the run's ref, for receivers' `refs:`; "" for host events (cards, the queue)
  double at = 0;      // seconds since the epoch
  std::string title;  // one line: "card 3 is bad", "main is red: st / system tests failed"
  std::vector<std::string> lines;  // what a person reads next: causes, failed tests, evidence
  std::string link;   // the daemon's page for it (a run, the cards), "" none
  nlohmann::json details = nlohmann::json::object();  // the same as data, for webhooks

  nlohmann::json json() const;
  static NotifyEvent from_json(const nlohmann::json& j);
};

/// Whether `receiver` wants `event`: its kind among the receiver's events (all when none are listed), and its
/// ref among the receiver's refs (globs; all when none; an event without a ref always passes).
bool receiver_wants(const NotifyReceiver& receiver, const NotifyEvent& event);

/// A receiver's URL as logs and the status show it: its scheme and host (Feishu's and Slack's hold a token).
std::string shown_url(const std::string& url);

}  // namespace pto
