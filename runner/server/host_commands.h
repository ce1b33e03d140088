#pragma once
// HostCommands: the narrow face through which the API changes anything. The API checks the request and the
// caller (server/requests, server/access) and hands over typed commands; the host (the daemon, or a foreground
// run's lease endpoints) acts on its own thread and answers with an outcome and a JSON body. Reads never come
// here: they render the read model (read_model/read_model.h).
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bisect/bisection.h"
#include "config/runner_config.h"
#include "lease/lease.h"
#include "server/access.h"
#include "server/requests.h"
#include "util/answer.h"

namespace pto {

class HostCommands {
 public:
  using Reply = pto::Reply;
  virtual ~HostCommands() = default;
  /// Answered once the run is planned and started (a commit is checked out first), or refused.
  virtual void submit_run(RunSubmission submission, const Caller& by, Reply reply);
  virtual Answer cancel_run(const std::string& id, const Caller& by);
  /// An attached client leaves its run (submit --attach): at its end, or interrupted (`cancel`: the jobs only
  /// it asked for are cancelled).
  virtual Answer detach_client(const std::string& run, const std::string& client, bool cancel, const Caller& by);
  /// An operator drains a card (`drain`, with `reason`) or returns it to service; likewise a Slurm node.
  virtual Answer change_card(int card, bool drain, const std::string& reason, const Caller& by);
  virtual Answer change_node(const std::string& node, bool drain, const std::string& reason, const Caller& by);
  /// An admin mutes a test id or glob until a date (`POST /api/v1/tests/mute`), or removes its mute.
  virtual Answer mute_test(const TestMute& mute, const Caller& by);
  virtual Answer unmute_test(const std::string& glob, const Caller& by);
  /// An admin starts a bisection (answered once its commits are known: 201 with its id) or cancels one.
  virtual void start_bisection(BisectSpec spec, const Caller& by, Reply reply);
  virtual Answer cancel_bisection(const std::string& id, const Caller& by);
  /// Answered once the cards are granted, or refused (409 never, 504 not in time, 503 stopping).
  virtual void request_lease(LeaseRequest request, const Caller& by, Reply reply) = 0;
  virtual Answer heartbeat_lease(const std::string& id, const Caller& by) = 0;
  /// `why` "released by its client" is the client's own end (its command is over); anything else kills
  /// what still runs under it. Answered once its processes are gone and its cards free.
  virtual void end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) = 0;
  /// A finished run's record was served (a draining daemon waits until each run that ended was read once).
  virtual void run_read(const std::string& /*id*/) {}
  /// What the host changed is kept before an answer goes out (its journal may commit a turn's writes together).
  virtual void durable() {}
  /// `ended` is called at active run `id`'s end, once its record is kept, unless it expired by then (a GET held
  /// until the run ends: `wait`). Without a host that says so, never: the hold's own time answers.
  virtual void when_run_ends(const std::string& /*id*/, std::weak_ptr<const std::function<void()>> /*ended*/) {}
};

}  // namespace pto
