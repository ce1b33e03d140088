// The daemon's side of the lease endpoints (the endpoints themselves: server/lease_service): who may call
// them. Mutations take the admin token or a run's own lease token (PTO_RUNNER_LEASE_TOKEN, given to its steps):
// a run's leases are charged to it and die with it, and its token reaches nothing else. While the daemon
// drains, accepted runs may still lease; nothing else may.
#include <openssl/crypto.h>

#include "server/daemon.h"
#include "util/json_text.h"

namespace pto {

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

nlohmann::json Daemon::leases_json() const { return lease_service_ ? lease_service_->active_json() : nlohmann::json::array(); }

void Daemon::lease_request(const HttpRequest& req, HttpServer::Respond respond) {
  std::string run;
  if (!lease_authorized(req, run))
    return respond({401, "application/json",
                    dump_json({{"error", "missing or wrong bearer token (the admin token, or $PTO_RUNNER_LEASE_TOKEN in a step)"}}), {}});
  lease_service_->request(req, run, std::move(respond));
}

HttpResponse Daemon::lease_route(const HttpRequest& req, const std::string& id, const std::string& action) {
  std::string run;
  if (!lease_authorized(req, run)) return {401, "application/json", dump_json({{"error", "missing or wrong bearer token"}}), {}};
  return lease_service_->route(req, id, action, run);
}

}  // namespace pto
