#include "lease/lease_state_json.h"

namespace pto {

nlohmann::json lease_state_json(const Lease& l) {
  const LeaseRequest& r = l.request;
  return {{"id", l.id},
          {"cards", l.cards},
          {"marker", l.marker},
          {"cgroup", l.cgroup},
          {"created", l.created},
          {"granted", l.granted},
          {"request",
           {{"devices", r.devices},
            {"device_ids", r.device_ids},
            {"device_type", r.device_type},
            {"max_seconds", r.max_seconds},
            {"label", r.label},
            {"test", r.test},
            {"run_id", r.run_id},
            {"step", r.step ? r.step->text() : ""},
            {"avoid", r.avoid}}}};
}

Lease lease_state_from_json(const nlohmann::json& j) {
  Lease l;
  if (!j.is_object()) return l;
  l.id = j.value("id", "");
  l.cards = j.value("cards", std::vector<int>{});
  l.marker = j.value("marker", "");
  l.cgroup = j.value("cgroup", "");
  l.created = j.value("created", "");
  l.granted = j.value("granted", "");
  const nlohmann::json r = j.value("request", nlohmann::json::object());
  l.request.devices = r.value("devices", 1);
  l.request.device_ids = r.value("device_ids", std::vector<int>{});
  l.request.device_type = r.value("device_type", "");
  l.request.max_seconds = r.value("max_seconds", 0.0);
  l.request.label = r.value("label", "");
  l.request.test = r.value("test", "");
  l.request.run_id = r.value("run_id", "");
  l.request.step = StepId::parse(r.value("step", ""));
  l.request.avoid = r.value("avoid", std::vector<int>{});
  return l;
}

}  // namespace pto
