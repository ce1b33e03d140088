#include "lease/lease_desk.h"

#include <spdlog/spdlog.h>

#include "host/host.h"
#include "lease/lease_wire.h"

namespace pto {

namespace w = lease_wire;

namespace {

nlohmann::json lease_to_json(const Lease& l) {
  return {{w::kId, l.id},
          {w::kState, to_string(l.state)},
          {w::kCards, l.cards},
          {w::kDevices, l.request.device_ids.empty() ? l.request.devices : static_cast<int>(l.request.device_ids.size())},
          {"device_type", l.request.device_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.request.device_type)},
          {w::kLabel, l.request.label},
          {"run", l.request.run_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.request.run_id)},
          {"created", l.created},
          {"granted", l.granted.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.granted)},
          {"max_seconds", l.request.max_seconds}};
}

Answer gone(const std::string& why) { return Answer::error(Outcome::Gone, why); }

}  // namespace

LeaseDesk::LeaseDesk(LeaseBook& book, Host& host) : book_(book), host_(host) {
  book_.set_on_granted_end([this](const Lease& l) {
    host_.lease_ended(l.marker);
    if (card_access_) card_access_(l, false);
    if (on_ended_) on_ended_(l);
  });
}

nlohmann::json LeaseDesk::active_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const Lease* l : book_.active()) out.push_back(lease_to_json(*l));
  return out;
}

void LeaseDesk::request(LeaseRequest lr, const std::string& run, Reply reply) {
  for (int id : lr.device_ids) {
    if (host_.cluster_picks_cards())
      return reply({Outcome::BadRequest, {{w::kError, "device-ids: Slurm picks the cards under executor: slurm; ask for a count (devices)"},
                                          {"field", w::kDeviceIds}}});
    if (!host_.has_card(id))
      return reply({Outcome::BadRequest, {{w::kError, "device-ids: no card " + std::to_string(id) + " on this host"}, {"field", w::kDeviceIds}}});
  }
  lr.run_id = run;
  // executor: slurm: the lease is granted at once and its command waits in Slurm's queue; the wait and run
  // limits go into its srun line (they count from the submission and from the command's start there), not
  // into the lease book's clocks, which start at the grant.
  const double cluster_max = lr.max_seconds, cluster_wait = lr.wait_seconds;
  if (host_.cluster_picks_cards()) lr.max_seconds = lr.wait_seconds = 0;
  std::string id = book_.create(
      lr,
      [this, reply, cluster_max, cluster_wait](const Lease& l) {
        if (card_access_) card_access_(l, true);
        if (on_granted_) on_granted_(l);
        nlohmann::json granted = {{w::kId, l.id},
                                  {w::kCards, l.cards},
                                  {w::kMarker, l.marker},
                                  {w::kCgroup, l.cgroup},
                                  {"heartbeat_seconds", 1},
                                  {"heartbeat_timeout_seconds", book_.heartbeat_timeout()},
                                  {"max_seconds", l.request.max_seconds}};
        auto prefix = host_.lease_command_prefix(l.marker, l.request.run_id, "lease " + l.id + ": " + l.request.label,
                                                 l.request.devices, l.request.device_type, cluster_max, cluster_wait);
        if (!prefix.empty()) granted[w::kSrun] = prefix;
        reply({Outcome::Created, std::move(granted)});
      },
      [reply](int status, const std::string& why) { reply(Answer::error(static_cast<Outcome>(status), why)); });
  spdlog::debug("lease {} requested{}", id, run.empty() ? "" : " by run " + run);
}

void LeaseDesk::restore(Lease lease, double held_seconds) {
  const std::string id = lease.id;
  book_.restore(std::move(lease), held_seconds);
  if (const Lease* l = book_.find(id); l && card_access_) card_access_(*l, true);
}

Answer LeaseDesk::heartbeat(const std::string& id, const std::string& run) {
  const Lease* l = book_.find(id);
  if (!l || (!run.empty() && l->request.run_id != run)) return gone("no active lease " + id + " (it ended or was revoked)");
  if (!book_.heartbeat(id)) return gone("lease " + id + " was revoked: " + l->end_reason);
  return {Outcome::Ok, {{w::kId, id}, {w::kState, "granted"}}};
}

void LeaseDesk::end(const std::string& id, const std::string& why, const std::string& run, Reply reply, LeaseReport report) {
  const Lease* l = book_.find(id);
  if (!l || (!run.empty() && l->request.run_id != run)) return reply(gone("no active lease " + id + " (it ended or was revoked)"));
  // Being revoked (its processes are being killed): its client learns it was not its own end.
  if (l->state == LeaseState::Revoked || l->state == LeaseState::Ended)
    return reply(gone("lease " + id + " was " + to_string(l->state) + ": " + l->end_reason));
  book_.end(id, why, why == w::kReleasedByClient, [reply, id] { reply({Outcome::Ok, {{w::kId, id}, {w::kState, "ended"}}}); },
            std::move(report));
}

}  // namespace pto
