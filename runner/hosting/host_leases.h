#pragma once
// A daemon's card leases (docs/choices.md, "Card leases and task-submit"): the book that holds them
// (lease/lease_book), the desk that answers the API's lease commands (lease/lease_desk) and, once the steps'
// own endpoint listens, the site its runs reach them through. One owner of the three, as a foreground run's
// server/lease_endpoint is of its own. Beyond the book and the desk, what a host adds:
//   admission  while the daemon drains only its accepted runs lease; a run's lease is the run's to admit first
//              (max-cards-per-run, a step's bounds: HostedRun::admit_lease)
//   ends       a lease's end goes into its cards' history; a failure its client reports is evidence for its
//              step (the run's) or, for an operator's lease, charged to its cards here
//   restarts   a granted lease's cards and command stay with the step supervisor when the daemon goes; the next
//              daemon grants again those whose run goes on (restore)
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "host/host.h"
#include "hosting/hosted_run.h"
#include "lease/lease_book.h"
#include "lease/lease_desk.h"
#include "server/host_commands.h"

namespace pto {

class RunHistory;
class Shutdown;
struct Metrics;

class HostLeases {
 public:
  /// What the leases need of the host. Each outlives them.
  struct Parts {
    boost::asio::io_context& io;
    Host& host;
    const RunnerConfig& cfg;  // health (an operator's lease's failure), kill grace
    RunHistory& history;      // the cards' history
    Metrics& metrics;
    Shutdown& stop;
  };
  using FindRun = std::function<HostedRun*(const std::string& id)>;
  /// `refresh`: the read model now (a client reads its own lease next); `changed`: soon.
  HostLeases(Parts parts, FindRun find_run, std::function<void()> refresh, std::function<void()> changed);

  void request(LeaseRequest request, const Caller& by, HostCommands::Reply reply);
  Answer heartbeat(const std::string& id, const Caller& by) { return desk.heartbeat(id, by.lease_scope()); }
  void end(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, HostCommands::Reply reply);
  /// At start: the leases the last daemon's supervisor kept, granted again where their run goes on (`adopted`)
  /// or they are an operator's; the others' cards go back.
  void restore(const std::set<std::string>& adopted);
  /// The steps' endpoint listens at `url`: runs reach their leases there.
  void open_site(Access& access, const std::string& url) { site.emplace(LeaseSite{access, book, url}); }
  LeaseSite* site_or_null() { return site ? &*site : nullptr; }
  void set_kill_grace(double seconds) { book.set_kill_grace(seconds); }

  LeaseBook book;
  LeaseDesk desk;
  std::optional<LeaseSite> site;

 private:
  /// A granted lease ended: its cards' history and, when its client said its command failed, its cause and
  /// its cards charged (the step's run for a step's lease; here for an operator's).
  void ended(const Lease& l);
  void hand_to_supervisor();

  Parts parts_;
  FindRun find_run_;
  std::function<void()> refresh_;
};

}  // namespace pto
