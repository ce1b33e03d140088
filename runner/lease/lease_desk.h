#pragma once
// LeaseDesk: the lease commands (SPEC: the task-submit drop-in and card leases) over a LeaseBook and the host's
// face, for whichever host serves them: the daemon beside its other commands, and a foreground `run` for its
// own steps (server/lease_endpoint). No HTTP here: the API parses and authorises (server/api, server/access), the
// desk acts and answers. Each call names the run the caller speaks for ("" for an operator): a run's caller
// reaches that run's leases only.
//   request    answered once granted: {id, cards, marker, cgroup, heartbeat_seconds, ..., srun under Slurm}
//   heartbeat  ok, or 410 once revoked (the client must stop its command)
//   end        what still runs under it is killed, its cards freed; answered when that is done
#include <nlohmann/json.hpp>

#include "lease/lease_book.h"
#include "util/answer.h"

namespace pto {

struct Host;

class LeaseDesk {
 public:
  LeaseDesk(LeaseBook& book, Host& host);
  void request(LeaseRequest request, const std::string& run, Reply reply);
  Answer heartbeat(const std::string& id, const std::string& run);
  /// Answered once what ran under it is gone and its cards are free (a client exits only after that).
  void end(const std::string& id, const std::string& why, const std::string& run, Reply reply, LeaseReport report = {});
  /// The active leases, as the status and `task-submit --list` show them.
  nlohmann::json active_json() const;
  /// Called when a lease is granted (true) and when its granted cards come back (false): the daemon gives the
  /// run's sandbox user its leased cards' files for that long (HostedRun::lease_card_access).
  void set_card_access(std::function<void(const Lease&, bool granted)> f) { card_access_ = std::move(f); }
  /// Called when a granted lease has ended (its cards are about to go back): the cards' history.
  void set_on_ended(std::function<void(const Lease&)> f) { on_ended_ = std::move(f); }
  /// Called when a lease is granted, before its client hears it (the daemon hands its cards' flocks to the
  /// step supervisor, so they outlive the daemon).
  void set_on_granted(std::function<void(const Lease&)> f) { on_granted_ = std::move(f); }
  /// A lease an earlier daemon granted, granted again (LeaseBook::restore) with its user's card files.
  void restore(Lease lease, double held_seconds);

 private:
  std::function<void(const Lease&)> on_granted_;
  std::function<void(const Lease&)> on_ended_;
  LeaseBook& book_;
  Host& host_;
  std::function<void(const Lease&, bool)> card_access_;
};

}  // namespace pto
