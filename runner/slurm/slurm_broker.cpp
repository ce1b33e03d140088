#include "slurm/slurm_broker.h"

#include <boost/asio.hpp>
#include <chrono>
#include <ctime>

#include "util/iso_time.h"
#include "util/clock.h"

namespace pto {

std::uint64_t SlurmBroker::request(CardRequest, Grant on_grant, Impossible) {
  const std::uint64_t ticket = ++next_;
  waiting_.insert(ticket);
  // Posted: the engine records the ticket before it hears the grant.
  boost::asio::post(io_, [this, ticket, on_grant = std::move(on_grant)] {
    if (waiting_.erase(ticket)) on_grant({});
  });
  return ticket;
}

std::vector<QueueEntry> SlurmBroker::queue() {
  std::vector<QueueEntry> out;
  const double now = static_cast<double>(wall_time_t());
  for (const auto& j : cluster_.jobs()) {
    if (!j.pending()) continue;
    QueueEntry e;
    e.label = cluster_.label_of(j.name);
    if (e.label.empty()) e.label = j.comment.substr(j.comment.find(" step=") == std::string::npos ? 0 : j.comment.find(" step=") + 6);
    e.devices = cluster_.devices_of(j.name);
    e.marker = marker_of_job(j.name);
    e.reason = j.wait_reason();
    e.cluster_reason = j.slurm_reason();
    e.waited_seconds = j.submit_time > 0 ? std::max(0.0, now - static_cast<double>(j.submit_time)) : 0;
    e.since = j.submit_time > 0 ? iso_time(std::chrono::system_clock::from_time_t(static_cast<std::time_t>(j.submit_time))) : "";
    out.push_back(std::move(e));
  }
  // Behind them, the steps not submitted yet (slurm.max-cards), in the order they will be.
  for (const auto& q : cluster_.queued_here()) {
    QueueEntry e;
    e.label = q.label;
    e.devices = q.devices;
    e.reason = q.reason;
    e.marker = q.marker;
    e.waited_seconds = std::chrono::duration<double>(wall_now() - q.since).count();
    e.since = iso_time(q.since);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace pto
