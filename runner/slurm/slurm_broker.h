#pragma once
// The card broker of `executor: slurm`. Slurm is the queue: a device step is admitted at once with no cards
// of ours, and the Slurm executor submits it; Slurm picks the node and cards and the step waits in Slurm's
// queue, with Slurm's reason. So `queue()` is Slurm's queue as far as it holds our jobs (from the cluster's
// last snapshot), and card health is Slurm's business (drain a node with `devices --drain`, which becomes
// `scontrol update state=drain`).
#include <map>
#include <set>

#include "engine/card_broker.h"
#include "slurm/slurm_cluster.h"

namespace boost::asio {
class io_context;
}

namespace pto {

class SlurmBroker : public CardBroker {
 public:
  SlurmBroker(boost::asio::io_context& io, SlurmCluster& cluster) : io_(io), cluster_(cluster) {}
  std::uint64_t request(CardRequest req, Grant on_grant, Impossible on_impossible) override;
  void withdraw(std::uint64_t ticket) override { waiting_.erase(ticket); }
  void release(const std::vector<int>&) override {}
  std::vector<int> report_outcome(const std::vector<int>&, bool, const std::string&) override { return {}; }
  bool is_drained(int) const override { return false; }
  void relabel(int, const std::string&) override {}
  std::vector<QueueEntry> queue() override;

 private:
  boost::asio::io_context& io_;
  SlurmCluster& cluster_;
  std::uint64_t next_ = 0;
  std::set<std::uint64_t> waiting_;  // admitted, grant not yet delivered (it is posted)
};

}  // namespace pto
