#include "server/lease_endpoint.h"

#include "host/host.h"

namespace pto {

LeaseEndpoint::LeaseEndpoint(boost::asio::io_context& io, Host& host, double kill_grace_seconds)
    // A client heartbeats every second; five missed and it is gone (killed, lost): its cards come back.
    : book_(io, host.broker(), 5, kill_grace_seconds),
      desk_(book_, host),
      access_(/*reads_need_token=*/true),
      api_(io, nullptr, model_, *this, access_, {true, "a foreground run serves only its leases"}),
      server_(io, [this](const HttpRequest& req, HttpServer::Respond respond) { api_.handle(req, std::move(respond)); }) {
  book_.set_on_change([this] { model_.host.leases = desk_.active_json(); });
}

std::string LeaseEndpoint::start() { return server_.listen("127.0.0.1", 0); }

std::string LeaseEndpoint::url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

void LeaseEndpoint::close(const std::string& why) {
  closed_ = true;
  book_.end_all(why);
  server_.stop();
}

void LeaseEndpoint::request_lease(LeaseRequest request, const Caller& by, Reply reply) {
  if (closed_) return reply(Answer::error(Outcome::Unavailable, "the run is over: no more leases"));
  if (admit_)
    if (auto refused = admit_(request, by)) return reply(std::move(*refused));
  desk_.request(std::move(request), by.lease_scope(), std::move(reply));
}

Answer LeaseEndpoint::heartbeat_lease(const std::string& id, const Caller& by) { return desk_.heartbeat(id, by.lease_scope()); }

void LeaseEndpoint::end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) {
  desk_.end(id, why, by.lease_scope(), std::move(reply), report);
}

}  // namespace pto
