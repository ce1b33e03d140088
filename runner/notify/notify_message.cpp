#include "notify/notify_message.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>

#include "util/iso_time.h"

namespace pto {

namespace {

std::string hmac_sha256(const std::string& key, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
       &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string base64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string hex(const std::string& raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) out += digits[c >> 4], out += digits[c & 15];
  return out;
}

/// The message's first line: the group's first event, and how many more it stands for.
std::string title_of(const std::vector<OutboxEntry>& batch) {
  if (batch.empty()) return "";
  std::string t = batch.front().event.title;
  if (batch.size() > 1) t += " (and " + std::to_string(batch.size() - 1) + " more)";
  return t;
}

/// Each event: its title, then its lines and link, for a person (Feishu's text, Slack's sections).
std::string event_text(const NotifyEvent& e, const char* bullet, bool bold_title) {
  std::string t = bold_title ? "*" + e.title + "*" : e.title;
  for (const std::string& l : e.lines) t += std::string("\n") + bullet + l;
  if (!e.link.empty()) t += "\n" + e.link;
  return t;
}

std::string clipped(std::string s, std::size_t max) {
  if (s.size() <= max) return s;
  s.resize(max - 3);
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();  // not inside a UTF-8 character
  if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0) s.pop_back();
  return s + "...";
}

}  // namespace

std::string feishu_sign(long long timestamp, const std::string& secret) {
  return base64(hmac_sha256(std::to_string(timestamp) + "\n" + secret, ""));
}

std::string webhook_signature(const std::string& secret, const std::string& body) { return "sha256=" + hex(hmac_sha256(secret, body)); }

NotifyMessage render_message(const NotifyReceiver& receiver, const std::vector<OutboxEntry>& batch, const std::string& secret,
                             long long now, bool possible_duplicate, const std::string& host) {
  NotifyMessage m;
  m.title = title_of(batch);
  const std::string mark = possible_duplicate ? "[possibly repeated] " : "";
  m.headers.push_back("Content-Type: application/json");
  nlohmann::json body;
  if (receiver.kind == NotifyChannel::Feishu) {
    std::string text = mark + "pto-runner on " + host + ": " + m.title;
    for (const OutboxEntry& e : batch) text += "\n\n" + event_text(e.event, "  ", false);
    body = {{"msg_type", "text"}, {"content", {{"text", clipped(text, 20000)}}}};
    if (!secret.empty()) {
      body["timestamp"] = std::to_string(now);
      body["sign"] = feishu_sign(now, secret);
    }
  } else if (receiver.kind == NotifyChannel::Slack) {
    // Slack's limits: a header's text 150 characters, a section's 3000, 50 blocks a message.
    nlohmann::json blocks = nlohmann::json::array();
    blocks.push_back({{"type", "header"}, {"text", {{"type", "plain_text"}, {"text", clipped(mark + m.title, 150)}}}});
    for (std::size_t i = 0; i < batch.size() && blocks.size() < 48; ++i)
      blocks.push_back({{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", clipped(event_text(batch[i].event, "• ", true), 3000)}}}});
    if (blocks.size() == 48 && batch.size() > 47)
      blocks.push_back({{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", std::to_string(batch.size() - 47) + " more not shown"}}}});
    blocks.push_back({{"type", "context"}, {"elements", {{{"type", "mrkdwn"}, {"text", "pto-runner on " + host}}}}});
    body = {{"text", clipped(mark + "pto-runner on " + host + ": " + m.title, 3000)}, {"blocks", blocks}};
  } else {
    nlohmann::json events = nlohmann::json::array();
    for (const OutboxEntry& e : batch) {
      nlohmann::json j = e.event.json();
      j["id"] = e.id;
      j["at"] = iso_from_epoch(e.event.at);
      events.push_back(std::move(j));
    }
    body = {{"version", 1},
            {"source", "pto-runner"},
            {"host", host},
            {"receiver", receiver.name},
            {"sent_at", iso_from_epoch(static_cast<double>(now))},
            {"possible_duplicate", possible_duplicate},
            {"title", m.title},
            {"events", events}};
  }
  // Invalid UTF-8 from a step's output is replaced, never a throw.
  m.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (receiver.kind == NotifyChannel::Webhook && !secret.empty())
    m.headers.push_back("X-Pto-Runner-Signature-256: " + webhook_signature(secret, m.body));
  return m;
}

}  // namespace pto
