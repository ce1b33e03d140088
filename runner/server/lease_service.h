#pragma once
// The lease endpoints (SPEC: the task-submit drop-in and card leases) over a LeaseBook, for whoever serves
// them: `serve` beside the rest of its API, and `run` alone on a loopback port for its own steps (a harness
// step's `task-submit` borrows cards from the run's queue either way).
//   POST   /api/v1/leases                {devices, device-ids, device-type, max-seconds, wait-seconds, label}
//          answers once the cards are granted: 201 {id, cards, marker, cgroup, expires, heartbeat_seconds};
//          409 no card can ever serve it, 504 none within wait-seconds, 503 shutting down
//   POST   /api/v1/leases/{id}/heartbeat  200, or 410 once revoked (the client must stop its command)
//   DELETE /api/v1/leases/{id}            ends it: what still runs under it is killed, its cards freed
// Who may call is the owner's decision (tokens); the service is told which run a caller speaks for.
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/leases.h"
#include "server/http_server.h"

namespace pto {

struct Host;

class LeaseService {
 public:
  /// `refusal`: why no lease may be taken now for `run` ("" when called by an operator), or nothing.
  using Refusal = std::function<std::optional<HttpResponse>(const std::string& run)>;
  LeaseService(LeaseBook& book, Host& host, Refusal refusal);

  /// POST /api/v1/leases by a caller speaking for `run`; answered once granted or refused.
  void request(const HttpRequest& req, const std::string& run, HttpServer::Respond respond);
  /// POST .../heartbeat (`action` "heartbeat") or DELETE (anything else) of lease `id`.
  HttpResponse route(const HttpRequest& req, const std::string& id, const std::string& action, const std::string& run);
  /// The active leases, as the status and `task-submit --list` show them.
  nlohmann::json active_json() const;

 private:
  LeaseBook& book_;
  Host& host_;
  Refusal refusal_;
};

}  // namespace pto
