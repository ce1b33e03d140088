#include "read_model/card_history.h"

#include <algorithm>
#include <chrono>

#include "util/iso_time.h"

namespace pto {

namespace {

std::string iso_of(double epoch) {
  return iso_time(std::chrono::system_clock::time_point(std::chrono::milliseconds(static_cast<long long>(epoch * 1000))));
}

}  // namespace

nlohmann::json CardEvent::json() const {
  nlohmann::json j = {{"card", card}, {"kind", kind}, {"start", start}, {"end", end}, {"started", iso_of(start)},
                      {"ended", iso_of(end)}, {"label", label}, {"result", result}, {"detail", detail}};
  if (!run.empty()) j["run"] = run;
  if (!step.empty()) j["step_id"] = step;
  return j;
}

std::optional<CardEvent> CardEvent::from_json(int card, const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || !j.contains("start") || !j["start"].is_number() ||
      !j.contains("end") || !j["end"].is_number())
    return std::nullopt;
  CardEvent e;
  e.card = card;
  e.kind = j["kind"];
  e.start = j["start"];
  e.end = j["end"];
  auto text = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  e.label = text("label");
  e.run = text("run");
  e.step = text("step_id");
  e.result = text("result");
  e.detail = text("detail");
  return e;
}

void CardHistory::add(CardEvent e) {
  const double horizon = e.end - kWindowSeconds;
  // Events come in (nearly) end order; one that ended earlier than the newest goes to its place.
  auto at = std::upper_bound(events_.begin(), events_.end(), e.end, [](double t, const CardEvent& x) { return t < x.end; });
  events_.insert(at, std::move(e));
  while (!events_.empty() && events_.front().end < horizon) events_.pop_front();
}

nlohmann::json CardHistory::to_json(double now) const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : events_)
    if (e.end >= now - kWindowSeconds) list.push_back(e.json());
  return {{"from", iso_of(now - kWindowSeconds)}, {"to", iso_of(now)}, {"from_epoch", now - kWindowSeconds}, {"to_epoch", now},
          {"events", std::move(list)}};
}

}  // namespace pto
