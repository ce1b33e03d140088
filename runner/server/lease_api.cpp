// The lease endpoints of `pto-runner serve` (SPEC: the task-submit drop-in and card leases):
//   POST   /api/v1/leases                {devices, device-ids, device-type, max-seconds, wait-seconds, label}
//          answers once the cards are granted: 201 {id, cards, marker, cgroup, expires, heartbeat_seconds};
//          409 no card can ever serve it, 504 none within wait-seconds, 503 shutting down
//   POST   /api/v1/leases/{id}/heartbeat  200, or 410 once revoked (the client must stop its command)
//   DELETE /api/v1/leases/{id}            ends it: what still runs under it is killed, its cards freed
//   GET    /api/v1/leases                 the active leases
// Mutations take the admin token or a run's own lease token (PTO_RUNNER_LEASE_TOKEN, given to its steps): a run's
// leases are charged to it and die with it, and its token reaches nothing else.
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "server/daemon.h"
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

bool Daemon::lease_authorized(const HttpRequest& req, std::string& run) const {
  run.clear();
  if (authorized(req)) return true;
  const std::string prefix = "Bearer ";
  if (req.authorization.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string given = req.authorization.substr(prefix.size());
  for (const auto& [token, id] : lease_tokens_)
    if (given.size() == token.size() && CRYPTO_memcmp(given.data(), token.data(), token.size()) == 0) {
      run = id;
      return true;
    }
  return false;
}

nlohmann::json Daemon::leases_json() const {
  nlohmann::json out = nlohmann::json::array();
  if (leases_)
    for (const Lease* l : leases_->active()) out.push_back(lease_to_json(*l));
  return out;
}

void Daemon::lease_request(const HttpRequest& req, HttpServer::Respond respond) {
  std::string run;
  if (!lease_authorized(req, run))
    return respond(lease_json(401, {{"error", "missing or wrong bearer token (the admin token, or $PTO_RUNNER_LEASE_TOKEN in a step)"}}));
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
        if (host_->slurm) return bad(k, "device-ids: Slurm picks the cards under executor: slurm; ask for a count (devices)");
        if (!id.is_number_integer() || !pool_->has_card(id.get<int>()))
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
  // Accepted runs may still lease while the daemon drains; nothing else may.
  if (!server_ || cancelling_ || (draining_ && (run.empty() || !active_.count(run))))
    return respond(stopping_refusal());
  lr.run_id = run;
  // executor: slurm: the lease is granted at once and its command waits in Slurm's queue; the wait and run
  // limits go into its srun line (they count from the submission and from the command's start there), not
  // into the lease book's clocks, which start at the grant.
  const double slurm_max = lr.max_seconds, slurm_wait = lr.wait_seconds;
  if (host_->slurm) lr.max_seconds = lr.wait_seconds = 0;
  const std::string peer = req.peer;
  std::string id = leases_->create(
      lr,
      [this, respond, slurm_max, slurm_wait](const Lease& l) {
        nlohmann::json reply = {{"id", l.id},
                                {"cards", l.cards},
                                {"marker", l.marker},
                                {"cgroup", l.cgroup},
                                {"heartbeat_seconds", 1},
                                {"heartbeat_timeout_seconds", leases_->heartbeat_timeout()},
                                {"max_seconds", l.request.max_seconds}};
        // executor: slurm: Slurm is the queue. The client runs its command through this srun (a job named
        // after the lease), and the wrapper in the job sets TASK_DEVICE from the cards Slurm allocated.
        if (host_->slurm)
          reply["srun"] = slurm_lease_argv(*host_->slurm, l.marker, l.request.run_id, "lease " + l.id + ": " + l.request.label,
                                           l.request.devices, l.request.device_type, slurm_max, slurm_wait);
        respond(lease_json(201, reply));
      },
      [respond](int status, const std::string& why) { respond(lease_json(status, {{"error", why}})); });
  spdlog::debug("lease {} requested from {}{}", id, peer, run.empty() ? "" : " by run " + run);
}

HttpResponse Daemon::lease_route(const HttpRequest& req, const std::string& id, const std::string& action) {
  std::string run;
  if (!lease_authorized(req, run)) return lease_json(401, {{"error", "missing or wrong bearer token"}});
  const Lease* l = leases_->find(id);
  if (!l || (!run.empty() && l->request.run_id != run))
    return lease_json(410, {{"error", "no active lease " + id + " (it ended or was revoked)"}});
  if (action == "heartbeat") {
    if (!leases_->heartbeat(id)) return lease_json(410, {{"error", "lease " + id + " was revoked: " + l->end_reason}});
    return lease_json(200, {{"id", id}, {"state", "granted"}});
  }
  // The client says "released by its client" when its command is over; anything else (--kill, an operator)
  // ends a lease that may still have processes.
  std::string why = req.query.count("reason") ? req.query.at("reason") : "ended by request";
  leases_->end(id, why, why == "released by its client");
  return lease_json(200, {{"id", id}, {"state", "ended"}});
}

}  // namespace pto
