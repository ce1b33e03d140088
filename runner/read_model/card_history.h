#pragma once
// CardHistory, part of the read model: what happened on each card over the last day, for the cards page
// (GET /cards) and its JSON (GET /api/v1/cards): the steps and leases that held it (with their result), health
// checks, drains and returns. The run history (store/run_history) is its one writer (each event also goes to
// the journal's card_events table, so a restart keeps the day); the API renders it. Times are seconds since
// the epoch.
#include <deque>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "util/clock.h"  // epoch_now

namespace pto {

struct CardEvent {
  int card = 0;
  std::string kind;  // "step", "lease", "health-check", "drain", "return"
  double start = 0, end = 0;  // a drain or return: start == end
  std::string label;   // "job / step", "lease ID: LABEL", the health check's command
  std::string run, step;  // the run (and step id) it belongs to, when it does
  std::string result;  // a step's state, a lease's end, "passed"/"failed" for a check
  std::string detail;  // exit code, signal, error, drain reason
  nlohmann::json json() const;
  static std::optional<CardEvent> from_json(int card, const nlohmann::json& j);
};

class CardHistory {
 public:
  static constexpr double kWindowSeconds = 86400;
  /// Keeps `e` (and drops what ended more than a day before it).
  void add(CardEvent e);
  const std::deque<CardEvent>& events() const { return events_; }
  /// {"from", "to", "events": [...]}: what ended within the day before `now`, oldest first.
  nlohmann::json to_json(double now) const;

 private:
  std::deque<CardEvent> events_;  // by end time
};

}  // namespace pto
