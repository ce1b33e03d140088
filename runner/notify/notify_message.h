#pragma once
// One message for a receiver, made of a group of events (notify/notify_event): Feishu's custom bot (text,
// signed), Slack's incoming webhook (blocks), or pto-runner's own webhook body (docs/operators.md,
// "Notifications"). Pure: the notifier sends what this makes; the tests check it byte for byte.
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "notify/notify_event.h"

namespace pto {

/// An event as the outbox keeps it for one receiver.
struct OutboxEntry {
  long long id = 0;
  std::string receiver;
  NotifyEvent event;
  double created = 0;     // seconds since the epoch
  int attempts = 0;
  bool maybe_sent = false;  // an attempt's answer never came (the daemon died, a timeout): it may have arrived
};

struct NotifyMessage {
  std::string body;                  // JSON
  std::vector<std::string> headers;  // "Name: value", Content-Type included
  std::string title;                 // the message's first line (for logs and the status)
};

/// Feishu's custom-bot signature: base64(HMAC-SHA256(key = "TIMESTAMP\nSECRET", message = "")).
std::string feishu_sign(long long timestamp, const std::string& secret);

/// The webhook's signature header value: "sha256=" + hex(HMAC-SHA256(key = secret, message = body)).
std::string webhook_signature(const std::string& secret, const std::string& body);

/// `batch` (one group, in order) as one message for `receiver`. `secret`: the receiver's secret file's text
/// ("" none); `now`: seconds since the epoch (Feishu's timestamp); `host`: this daemon's host name.
/// `possible_duplicate`: an earlier attempt of some of it may have arrived: said in the message.
NotifyMessage render_message(const NotifyReceiver& receiver, const std::vector<OutboxEntry>& batch, const std::string& secret,
                             long long now, bool possible_duplicate, const std::string& host);

}  // namespace pto
