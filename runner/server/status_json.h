#pragma once
// GET /api/v1/status: the read model (read_model/host_view.h) as JSON. The HTML page (server/status_page) reads
// exactly this. Durations are seconds rounded to milliseconds; times are ISO 8601 UTC.
#include <nlohmann/json.hpp>

namespace pto {

struct HostView;
struct QueueView;

/// One waiting request as the status lists it (also a waiting step's `queue` in its run's JSON).
nlohmann::json queue_entry_json(const QueueView& q);

nlohmann::json status_to_json(const HostView& view, bool full_queue, double uptime_seconds);
nlohmann::json run_overview_json(const struct RunOverview& r);

}  // namespace pto
