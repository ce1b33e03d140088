#include "notify/notify_event.h"

#include <fnmatch.h>

#include <algorithm>

namespace pto {

nlohmann::json NotifyEvent::json() const {
  return {{"kind", kind}, {"group", group}, {"ref", ref}, {"at", at}, {"title", title}, {"lines", lines}, {"link", link}, {"details", details}};
}

NotifyEvent NotifyEvent::from_json(const nlohmann::json& j) {
  NotifyEvent e;
  e.kind = j.value("kind", "");
  e.group = j.value("group", "");
  e.ref = j.value("ref", "");
  e.at = j.value("at", 0.0);
  e.title = j.value("title", "");
  if (j.contains("lines") && j["lines"].is_array())
    for (const auto& l : j["lines"])
      if (l.is_string()) e.lines.push_back(l.get<std::string>());
  e.link = j.value("link", "");
  if (j.contains("details") && j["details"].is_object()) e.details = j["details"];
  return e;
}

bool receiver_wants(const NotifyReceiver& receiver, const NotifyEvent& event) {
  if (!receiver.events.empty() && std::find(receiver.events.begin(), receiver.events.end(), event.kind) == receiver.events.end())
    return false;
  if (receiver.refs.empty() || event.ref.empty()) return true;
  return std::any_of(receiver.refs.begin(), receiver.refs.end(),
                     [&](const std::string& glob) { return ::fnmatch(glob.c_str(), event.ref.c_str(), 0) == 0; });
}

std::string shown_url(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "(an URL)";
  const std::size_t path = url.find_first_of("/?#", scheme + 3);  // a path, query or fragment may hold the token
  std::string host = url.substr(0, path);
  if (const std::size_t at = host.find('@', scheme + 3); at != std::string::npos) host = host.substr(0, scheme + 3) + host.substr(at + 1);
  return host + (path == std::string::npos ? "" : "/...");
}

}  // namespace pto
