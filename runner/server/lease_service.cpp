#include "server/lease_service.h"

#include <spdlog/spdlog.h>

#include "host/host.h"
#include "slurm/slurm_command.h"
#include "slurm/slurm_executor.h"
#include "util/json_text.h"

namespace pto {

namespace {

HttpResponse lease_json(int status, const nlohmann::json& j) { return {status, "application/json", dump_json(j), {}}; }

nlohmann::json lease_to_json(const Lease& l) {
  return {{"id", l.id},
          {"state", l.state},
          {"cards", l.cards},
          {"devices", l.request.device_ids.empty() ? l.request.devices : static_cast<int>(l.request.device_ids.size())},
          {"device_type", l.request.device_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.request.device_type)},
          {"label", l.request.label},
          {"run", l.request.run_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.request.run_id)},
          {"created", l.created},
          {"granted", l.granted.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.granted)},
          {"max_seconds", l.request.max_seconds}};
}

}  // namespace

LeaseService::LeaseService(LeaseBook& book, Host& host, Refusal refusal)
    : book_(book), host_(host), refusal_(std::move(refusal)) {
  if (host_.slurm)  // a lease's command is a Slurm job named after it: it ends with the lease, however it ends
    book_.set_on_granted_end([this](const std::string& marker) {
      host_.slurm->command({"scancel", "--me", "--name=" + job_name_of(marker)});
    });
}

nlohmann::json LeaseService::active_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const Lease* l : book_.active()) out.push_back(lease_to_json(*l));
  return out;
}

void LeaseService::request(const HttpRequest& req, const std::string& run, HttpServer::Respond respond) {
  auto bad = [&](const std::string& field, const std::string& why) {
    respond(lease_json(400, {{"error", why}, {"field", field}}));
  };
  nlohmann::json body = nlohmann::json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return bad("", "the body must be a JSON object");
  LeaseRequest lr;
  for (const auto& [k, v] : body.items()) {
    if (k == "devices") {
      if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 4096) return bad(k, "devices is a count of cards, 1 or more");
      lr.devices = v.get<int>();
    } else if (k == "device-ids") {
      if (!v.is_array() || v.empty()) return bad(k, "device-ids is a list of card ids");
      for (const auto& id : v) {
        if (host_.slurm) return bad(k, "device-ids: Slurm picks the cards under executor: slurm; ask for a count (devices)");
        if (!id.is_number_integer() || !host_.pool->has_card(id.get<int>()))
          return bad(k, "device-ids: no card " + id.dump() + " on this host");
        lr.device_ids.push_back(id.get<int>());
      }
    } else if (k == "device-type") {
      if (!v.is_string()) return bad(k, "device-type is a card type name");
      lr.device_type = v.get<std::string>();
    } else if (k == "max-seconds" || k == "wait-seconds") {
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 7 * 86400.0) return bad(k, k + " is a number of seconds >= 0");
      (k == "max-seconds" ? lr.max_seconds : lr.wait_seconds) = v.get<double>();
    } else if (k == "label") {
      if (!v.is_string()) return bad(k, "label is a string");
      lr.label = v.get<std::string>().substr(0, 4096);
    } else {
      return bad(k, "unknown field '" + k + "'");
    }
  }
  if (auto refused = refusal_(run)) return respond(std::move(*refused));
  lr.run_id = run;
  // executor: slurm: the lease is granted at once and its command waits in Slurm's queue; the wait and run
  // limits go into its srun line (they count from the submission and from the command's start there), not
  // into the lease book's clocks, which start at the grant.
  const double slurm_max = lr.max_seconds, slurm_wait = lr.wait_seconds;
  if (host_.slurm) lr.max_seconds = lr.wait_seconds = 0;
  const std::string peer = req.peer;
  std::string id = book_.create(
      lr,
      [this, respond, slurm_max, slurm_wait](const Lease& l) {
        nlohmann::json reply = {{"id", l.id},
                                {"cards", l.cards},
                                {"marker", l.marker},
                                {"cgroup", l.cgroup},
                                {"heartbeat_seconds", 1},
                                {"heartbeat_timeout_seconds", book_.heartbeat_timeout()},
                                {"max_seconds", l.request.max_seconds}};
        // executor: slurm: Slurm is the queue. The client runs its command through this srun (a job named
        // after the lease), and the wrapper in the job sets TASK_DEVICE from the cards Slurm allocated.
        if (host_.slurm)
          reply["srun"] = slurm_lease_argv(*host_.slurm, l.marker, l.request.run_id, "lease " + l.id + ": " + l.request.label,
                                           l.request.devices, l.request.device_type, slurm_max, slurm_wait);
        respond(lease_json(201, reply));
      },
      [respond](int status, const std::string& why) { respond(lease_json(status, {{"error", why}})); });
  spdlog::debug("lease {} requested from {}{}", id, peer, run.empty() ? "" : " by run " + run);
}

HttpResponse LeaseService::route(const HttpRequest& req, const std::string& id, const std::string& action, const std::string& run) {
  const Lease* l = book_.find(id);
  if (!l || (!run.empty() && l->request.run_id != run))
    return lease_json(410, {{"error", "no active lease " + id + " (it ended or was revoked)"}});
  if (action == "heartbeat") {
    if (!book_.heartbeat(id)) return lease_json(410, {{"error", "lease " + id + " was revoked: " + l->end_reason}});
    return lease_json(200, {{"id", id}, {"state", "granted"}});
  }
  // Being revoked (its processes are being killed): its client learns it was not its own end.
  if (l->state == "revoked" || l->state == "ended")
    return lease_json(410, {{"error", "lease " + id + " was " + l->state + ": " + l->end_reason}});
  // The client says "released by its client" when its command is over; anything else (--kill, an operator)
  // ends a lease that may still have processes.
  std::string why = req.query.count("reason") ? req.query.at("reason") : "ended by request";
  book_.end(id, why, why == "released by its client");
  return lease_json(200, {{"id", id}, {"state", "ended"}});
}

}  // namespace pto
