#include "lease/run_leases.h"

#include "host/host.h"
#include "util/random_hex.h"

namespace pto {

RunLeases::RunLeases(boost::asio::io_context& io, Host& host, double kill_grace_seconds, std::string run_id)
    : run_id_(std::move(run_id)),
      token_(random_hex(16)),
      // A client heartbeats every second; five missed and it is gone (killed, lost): its cards come back.
      book_(io, host.broker(), 5, kill_grace_seconds),
      desk_(book_, host),
      access_(/*reads_need_token=*/true),
      api_(io, nullptr, model_, *this, access_, {true, "a foreground run serves only its leases"}),
      server_(io, [this](const HttpRequest& req, HttpServer::Respond respond) { api_.handle(req, std::move(respond)); }) {
  access_.add_run_token(token_, run_id_);
  book_.set_on_change([this] { model_.host.leases = desk_.active_json(); });
}

std::string RunLeases::start() { return server_.listen("127.0.0.1", 0); }

std::string RunLeases::url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

void RunLeases::close(const std::string& why) {
  closed_ = true;
  book_.end_all(why);
  server_.stop();
}

void RunLeases::request_lease(LeaseRequest request, const Caller& by, Reply reply) {
  if (closed_) return reply(Answer::error(Outcome::Unavailable, "the run is over: no more leases"));
  desk_.request(std::move(request), by.lease_scope(), std::move(reply));
}

Answer RunLeases::heartbeat_lease(const std::string& id, const Caller& by) { return desk_.heartbeat(id, by.lease_scope()); }

void RunLeases::end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) {
  desk_.end(id, why, by.lease_scope(), std::move(reply), report);
}

}  // namespace pto
