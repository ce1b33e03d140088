#pragma once
// ModelRefresh: how the read model stays current without a GET ever computing it. After a transition the
// host calls changed(); the model is refreshed on the next turn of the loop after a burst of them, at most
// once per 10 ms however many there are (once per forty times what a refresh costs where that is more, at most
// 100 ms: a host with thousands of steps queued); while anything waits or holds a card it is refreshed at least once a
// second, so waits and busy times keep counting with no transition at all. A command (submit, cancel, drain)
// refreshes it before answering, so its client reads its own change.
//
// What a refresh reads is each owner's: the runs (the model's active engines and requests), the broker's
// queue, the active leases (describe_runs below), the cards (the host's description, host/host_cards.cpp).
// The gathering is daemon/model_gather.cpp.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "engine/card_broker.h"
#include "lease/lease.h"
#include "read_model/read_model.h"


namespace pto {

class HostNotices;
class RunHost;
class RunStore;
class Shutdown;
struct Host;

/// What a refresh reads: each owner of what the status shows. Each outlives the refresh.
struct ViewSources {
  Host& host;
  RunHost& runs;
  RunStore& store;
  HostNotices& notices;
  const Shutdown& stop;
};

class ModelRefresh {
 public:
  /// Changes are not heard until arm().
  explicit ModelRefresh(boost::asio::io_context& io);
  ~ModelRefresh();
  /// The model the API renders: its owner.
  ReadModel model;
  /// What a refresh reads exists (the daemon started): changes are heard from now on.
  void arm(ViewSources from) { from_.emplace(from); }
  /// Refreshes at once (a command's client reads its own change next): daemon/model_gather.cpp.
  void now();
  /// What never changes while it runs: its version and commit, whether it simulates, and the pin the
  /// definitions in `root` ask for (shown until a lead job ran).
  void describe_daemon(const std::string& root, bool simulate);
  /// Something changed: refresh soon.
  void changed();
  /// A refresh that `began` then ran (it ends now). `busy`: something waits or holds a card (refresh again
  /// within a second).
  void refreshed(bool busy, std::chrono::steady_clock::time_point began);
  void stop();
  /// Cards drained or returned since the last refresh that asked (drain_changes below).
  std::vector<CardEvent> drain_changes(const HostView& v, double now);

 private:
  boost::asio::io_context& io_;
  std::optional<ViewSources> from_;
  std::unique_ptr<boost::asio::steady_timer> soon_, tick_;
  bool pending_ = false, tick_armed_ = false, stopped_ = false;
  std::chrono::steady_clock::time_point refreshed_at_;
  std::chrono::steady_clock::duration interval_ = std::chrono::milliseconds(10);  // between refreshes: 10 ms, more when one costs more
  std::map<int, bool> drained_seen_;  // each card's drained state at the last refresh
};

/// The model's active runs and the queue as the status shows them (model.host.active, model.host.queue, the
/// oldest wait), and who is on which card for the host's description of its cards. `queue` is the broker's,
/// in order; `leases` the active ones.
HostOccupancy describe_runs(ReadModel& model, std::vector<QueueEntry> queue, const std::vector<const Lease*>& leases);

/// Whether anything waits or holds a card or a node.
bool host_busy(const HostView& v);

/// Cards drained or returned since the last call (`seen`: each card's drained state then; a card seen for the
/// first time is no change): one card event each, for the cards' history.
std::vector<CardEvent> drain_changes(const HostView& v, std::map<int, bool>& seen, double now);

}  // namespace pto
