#include "server/run_leases.h"

#include <openssl/crypto.h>

#include <regex>

#include "host/host.h"
#include "util/json_text.h"
#include "util/random_hex.h"

namespace pto {

namespace {
HttpResponse json_answer(int status, const std::string& error) {
  return {status, "application/json", dump_json({{"error", error}}), {}};
}
}  // namespace

RunLeases::RunLeases(boost::asio::io_context& io, Host& host, double kill_grace_seconds, std::string run_id)
    : run_id_(std::move(run_id)),
      token_(random_hex(16)),
      // A client heartbeats every second; five missed and it is gone (killed, lost): its cards come back.
      book_(io, host.broker(), 5, kill_grace_seconds),
      service_(book_, host,
               [this](const std::string&) -> std::optional<HttpResponse> {
                 if (closed_) return json_answer(503, "the run is over: no more leases");
                 return std::nullopt;
               }),
      server_(io, [this](const HttpRequest& req, HttpServer::Respond respond) { handle(req, std::move(respond)); }) {}

std::string RunLeases::start() { return server_.listen("127.0.0.1", 0); }

std::string RunLeases::url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

void RunLeases::close(const std::string& why) {
  closed_ = true;
  book_.end_all(why);
  server_.stop();
}

void RunLeases::handle(const HttpRequest& req, HttpServer::Respond respond) {
  const std::string prefix = "Bearer ";
  const std::string given = req.authorization.compare(0, prefix.size(), prefix) == 0 ? req.authorization.substr(prefix.size()) : "";
  if (given.size() != token_.size() || CRYPTO_memcmp(given.data(), token_.data(), token_.size()) != 0)
    return respond(json_answer(401, "missing or wrong bearer token ($PTO_RUNNER_LEASE_TOKEN in a step of this run)"));
  const auto& seg = req.segments;
  static const std::regex lease_id("lease-[0-9a-f]{12}");
  const bool leases = seg.size() >= 3 && seg[0] == "api" && seg[1] == "v1" && seg[2] == "leases";
  if (leases && seg.size() == 3 && req.method == "POST") return service_.request(req, run_id_, std::move(respond));
  if (leases && seg.size() == 3 && req.method == "GET")
    return respond({200, "application/json", dump_json({{"leases", service_.active_json()}}), {}});
  if (leases && (seg.size() == 4 || (seg.size() == 5 && seg[4] == "heartbeat")) && std::regex_match(seg[3], lease_id)) {
    const bool heartbeat = seg.size() == 5;
    if (heartbeat ? req.method != "POST" : req.method != "DELETE") return respond(json_answer(405, "method not allowed"));
    return respond(service_.route(req, seg[3], heartbeat ? "heartbeat" : "end", run_id_));
  }
  respond(json_answer(404, "no such endpoint: " + req.path + " (a foreground run serves only its leases)"));
}

}  // namespace pto
