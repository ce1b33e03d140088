#pragma once
// LeaseEndpoint: a foreground `run`'s own lease endpoints. A step whose harness borrows cards itself (pypto's
// `--execute-via-task-submit`: one `task-submit` per batch of test cases) gets them from the run's own queue,
// as it would from the daemon's under `serve`: the same API (server/api, leases only) and lease desk as the
// daemon's, on a free loopback port. The run (hosting/hosted_run) registers its tokens in access() and tells
// its steps url(); every lease ends when the endpoint closes.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "lease/lease_book.h"
#include "lease/lease_desk.h"
#include "read_model/read_model.h"
#include "server/access.h"
#include "server/api.h"
#include "server/host_commands.h"
#include "server/http_server.h"

namespace boost::asio {
class io_context;
}

namespace pto {

struct Host;

class LeaseEndpoint : public HostCommands {
 public:
  LeaseEndpoint(boost::asio::io_context& io, Host& host, double kill_grace_seconds);
  /// Listens on 127.0.0.1 (a free port). "" or why not.
  std::string start();
  std::string url() const;
  /// The tokens it accepts (the run's and its steps' own), and the leases it keeps.
  Access& access() { return access_; }
  LeaseBook& book() { return book_; }
  LeaseDesk& desk() { return desk_; }
  /// Every request is first shown to `admit` (the run's limits and its step's bounds); an answer refuses it.
  void set_admit(std::function<std::optional<Answer>(LeaseRequest&, const Caller&)> admit) { admit_ = std::move(admit); }
  /// The run is over or cancelled: every lease ends (what runs under it is killed) and nothing new is taken.
  void close(const std::string& why);
  /// How the run's leases ended (released, heartbeat, daemon stopping...), as the daemon counts them.
  const std::map<std::string, long long>& ended_by_reason() const { return book_.ended_by_reason(); }

  void request_lease(LeaseRequest request, const Caller& by, Reply reply) override;
  Answer heartbeat_lease(const std::string& id, const Caller& by) override;
  void end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) override;

 private:
  bool closed_ = false;
  LeaseBook book_;
  LeaseDesk desk_;
  ReadModel model_;  // its leases only
  Access access_;
  Api api_;
  HttpServer server_;
  std::function<std::optional<Answer>(LeaseRequest&, const Caller&)> admit_;
};

}  // namespace pto
