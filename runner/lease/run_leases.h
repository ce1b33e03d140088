#pragma once
// `run`'s own lease endpoints: a step of a foreground run whose harness borrows cards itself (pypto's
// `--execute-via-task-submit`: one `task-submit` per batch of test cases) gets them from the run's own queue,
// as it would from the daemon's under `serve`. The same API (server/api, leases only) and lease desk as the
// daemon's, on a free loopback port, with a token made for the run; the run's steps get both
// (PTO_RUNNER_SERVER, PTO_RUNNER_LEASE_TOKEN), and every lease ends with the run.
#include <map>
#include <memory>
#include <string>

#include "lease/lease_book.h"
#include "lease/lease_desk.h"
#include "server/access.h"
#include "server/api.h"
#include "server/host_commands.h"
#include "server/http_server.h"
#include "server/read_model.h"

namespace boost::asio {
class io_context;
}

namespace pto {

struct Host;

class RunLeases : public HostCommands {
 public:
  RunLeases(boost::asio::io_context& io, Host& host, double kill_grace_seconds, std::string run_id);
  /// Listens on 127.0.0.1 (a free port). "" or why not.
  std::string start();
  std::string url() const;
  const std::string& token() const { return token_; }
  /// The run is over or cancelled: every lease ends (what runs under it is killed) and nothing new is taken.
  void close(const std::string& why);
  /// How the run's leases ended (released, heartbeat, daemon stopping...), as the daemon counts them.
  const std::map<std::string, long long>& ended_by_reason() const { return book_.ended_by_reason(); }

  /// See LeaseDesk::set_card_access.
  void set_card_access(std::function<void(const Lease&, bool granted)> f) { desk_.set_card_access(std::move(f)); }

  void request_lease(LeaseRequest request, const Caller& by, Reply reply) override;
  Answer heartbeat_lease(const std::string& id, const Caller& by) override;
  void end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) override;

 private:
  std::string run_id_, token_;
  bool closed_ = false;
  LeaseBook book_;
  LeaseDesk desk_;
  ReadModel model_;  // its leases only
  Access access_;
  Api api_;
  HttpServer server_;
};

}  // namespace pto
