#pragma once
// A daemon's card leases (docs/choices.md, "Card leases and task-submit"): the book that holds them
// (lease/lease_book), the desk that answers the API's lease commands (lease/lease_desk) and, once the steps'
// own endpoint listens, the site its runs reach them through. One owner of the three, as a foreground run's
// server/lease_endpoint is of its own.
#include <optional>

#include "host/host.h"
#include "hosting/hosted_run.h"
#include "lease/lease_book.h"
#include "lease/lease_desk.h"

namespace pto {

struct HostLeases {
  /// `heartbeat_seconds`: a lease whose client is silent that long is gone (killed, lost), its cards back.
  HostLeases(boost::asio::io_context& io, Host& host, double heartbeat_seconds, double kill_grace_seconds)
      : book(io, host.broker(), heartbeat_seconds, kill_grace_seconds), desk(book, host) {}
  LeaseBook book;
  LeaseDesk desk;
  std::optional<LeaseSite> site;
  LeaseSite* site_or_null() { return site ? &*site : nullptr; }
};

}  // namespace pto
