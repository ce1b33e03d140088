#pragma once
// CommandDesk: the daemon's HostCommands face. Each command the API has checked for its caller (server/access)
// is handed to its owner: runs and their clients (hosting/run_host), leases (hosting/host_leases), mutes
// (store/run_store), bisections (bisect/host_questions), cards and nodes (host/host). While the daemon stops
// (hosting/shutdown) it refuses what would start new work. It decides nothing itself.
#include "server/host_commands.h"

namespace pto {

class Host;
class HostQuestions;
class ModelRefresh;
class RunHost;
class RunStore;
class Shutdown;

class CommandDesk : public HostCommands {
 public:
  struct Owners {
    RunHost& runs;
    Host& host;
    RunStore& store;
    HostQuestions& questions;
    Shutdown& stop;
    ModelRefresh& view;  // a client's own change is in the status it reads next
  };
  explicit CommandDesk(Owners owners) : o_(owners) {}

  void submit_run(RunSubmission submission, const Caller& by, Reply reply) override;
  Answer cancel_run(const std::string& id, const Caller& by) override;
  Answer detach_client(const std::string& run, const std::string& client, bool cancel, const Caller& by) override;
  Answer change_card(int card, bool drain, const std::string& reason, const Caller& by) override;
  Answer change_node(const std::string& node, bool drain, const std::string& reason, const Caller& by) override;
  Answer mute_test(const TestMute& mute, const Caller& by) override;
  Answer unmute_test(const std::string& glob, const Caller& by) override;
  void start_bisection(BisectSpec spec, const Caller& by, Reply reply) override;
  Answer cancel_bisection(const std::string& id, const Caller& by) override;
  void request_lease(LeaseRequest request, const Caller& by, Reply reply) override;
  Answer heartbeat_lease(const std::string& id, const Caller& by) override;
  void end_lease(const std::string& id, const std::string& why, const LeaseReport& report, const Caller& by, Reply reply) override;
  void run_read(const std::string& id) override;
  void when_run_ends(const std::string& id, std::weak_ptr<const std::function<void()>> ended) override;
  void durable() override;

 private:
  Owners o_;
};

}  // namespace pto
