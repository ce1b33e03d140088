#include "server/run_changes.h"

#include <charconv>
#include <map>
#include <set>

#include "engine/engine.h"
#include "read_model/read_model.h"
#include "report/run_view.h"
#include "server/status_json.h"
#include "util/ids.h"

namespace pto {

namespace {

template <typename T>
bool parse_number(std::string_view s, T& out, int base) {
  if (s.empty() || s.size() > 20) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string RunRevision::text() const {
  char epoch_hex[17];
  std::snprintf(epoch_hex, sizeof epoch_hex, "%016llx", static_cast<unsigned long long>(epoch));
  return std::string(epoch_hex) + "-" + std::to_string(number) + "-" + std::to_string(generation);
}

std::optional<RunRevision> RunRevision::parse(std::string_view text) {
  const auto a = text.find('-');
  const auto b = a == std::string_view::npos ? a : text.find('-', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  RunRevision r;
  if (a != 16 || !parse_number(text.substr(0, a), r.epoch, 16) || !parse_number(text.substr(a + 1, b - a - 1), r.number, 10) ||
      !parse_number(text.substr(b + 1), r.generation, 10))
    return std::nullopt;
  return r;
}

nlohmann::json active_run_json(const RunEngine& e, const ReadModel& model, const std::optional<RunRevision>& since) {
  const RunRecord& rec = e.record();
  const Plan& plan = e.plan();
  const RunEngine::Revision now{e.revision()};
  const bool delta = since && since->epoch == now.epoch && since->number <= now.number && since->generation <= model.generation;
  // Its waiting steps' places in the queue: waiting reasons are the read model's (refreshed after
  // transitions), never computed for a GET.
  std::map<std::uint64_t, const QueueView*> by_ticket;
  for (const auto& q : model.host.queue) by_ticket[q.ticket] = &q;
  std::map<StepId, const QueueView*> queued;
  const QueueView* first = nullptr;
  for (std::size_t k = 0; k < plan.jobs.size(); ++k)
    for (std::size_t s = 0; s < plan.jobs[k].steps.size(); ++s) {
      const StepRecord& sr = rec.jobs[k].steps[s];
      if (sr.state != StepState::Waiting || !sr.ticket) continue;
      auto q = by_ticket.find(sr.ticket);
      if (q == by_ticket.end()) continue;
      queued[StepId{k, s}] = q->second;
      if (!first || q->second->position < first->position) first = q->second;
    }
  std::set<StepId> sent_for_queue;  // a delta's unchanged steps it carries for their place in the queue
  if (delta)
    for (const auto& [id, q] : queued)
      if (q == first || q->forecast_since > since->generation) sent_for_queue.insert(id);
  StepFilter only;
  if (delta)
    only = [&](int k, int s) {
      const StepId id{static_cast<std::size_t>(k), static_cast<std::size_t>(s)};
      return e.changed_since(id.job, id.step, since->number) || sent_for_queue.count(id);
    };
  nlohmann::json j = run_to_json(rec, plan, rec.cancelled ? "cancelling" : "running", -1, e.now(), only);
  for (auto& job : j["jobs"])
    for (auto& step : job["steps"]) {
      auto id = StepId::parse(step["id"].get<std::string>());
      auto q = id ? queued.find(*id) : queued.end();
      if (q == queued.end()) continue;
      step["wait_reason"] = q->second->reason;
      step["queue"] = queue_entry_json(*q->second);  // its position, expected start and why
    }
  j["revision"] = RunRevision{now.epoch, now.number, model.generation}.text();
  if (delta) j["delta"] = true;
  j["queue_total"] = model.host.queue.size();
  return j;
}

}  // namespace pto
