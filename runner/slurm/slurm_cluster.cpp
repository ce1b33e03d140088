#include "slurm/slurm_cluster.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <climits>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "util/sha256.h"

namespace pto {

std::string slurm_instance_tag(const std::string& state_dir) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::error_code ec;
  auto abs = std::filesystem::weakly_canonical(state_dir, ec);
  return sha256_hex(std::string(host) + ":" + (ec ? state_dir : abs.string())).substr(0, 12);
}

SlurmCluster::SlurmCluster(boost::asio::io_context& io, const RunnerConfig& cfg, std::string instance)
    : io_(io), runner_(cfg), cfg_(cfg.slurm), instance_(std::move(instance)),
      workers_(std::make_unique<boost::asio::thread_pool>(2)) {
  poller_ = std::thread([this] { poll_loop(); });
}

SlurmCluster::~SlurmCluster() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  poller_.join();
  workers_->join();
}

std::string SlurmCluster::comment(const std::string& run, const std::string& label) const {
  return "pto-runner instance=" + instance_ + " run=" + run + " step=" + label;
}

bool SlurmCluster::ours(const SlurmJob& j) const {
  return j.comment.rfind("pto-runner instance=" + instance_ + " ", 0) == 0;
}

void SlurmCluster::watch(const std::string& name, std::string label, std::function<void(const SlurmJob&)> on_update) {
  auto& w = watched_[name];
  w.label = std::move(label);
  w.on_update = std::move(on_update);
  std::lock_guard<std::mutex> g(mu_);
  watching_ = static_cast<int>(watched_.size());
}

void SlurmCluster::unwatch(const std::string& name) {
  watched_.erase(name);
  std::lock_guard<std::mutex> g(mu_);
  watching_ = static_cast<int>(watched_.size());
}

void SlurmCluster::note_submitted(const std::string& name, const std::string& group_type, int devices) {
  if (auto it = watched_.find(name); it != watched_.end()) {
    it->second.group_type = group_type;
    it->second.devices = devices;
  }
}

int SlurmCluster::devices_of(const std::string& name) const {
  auto it = watched_.find(name);
  return it == watched_.end() ? 0 : it->second.devices;
}

void SlurmCluster::unqueue_here(const std::string& marker) {
  queued_here_.erase(std::remove_if(queued_here_.begin(), queued_here_.end(),
                                    [&](const QueuedHere& q) { return q.marker == marker; }),
                     queued_here_.end());
}

std::string SlurmCluster::label_of(const std::string& name) const {
  auto it = watched_.find(name);
  return it == watched_.end() ? "" : it->second.label;
}

std::string SlurmCluster::pick_group_type(int devices, const std::string& card_type) const {
  const auto& groups = runner_.device_groups;
  std::string best, first;
  long best_score = LONG_MAX;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (static_cast<int>(groups[i].size()) < devices) continue;
    bool of_type = true;
    for (int card : groups[i]) of_type &= card_type.empty() || runner_.type_of(card) == card_type;
    if (!of_type) continue;
    const std::string type = cfg_.type_of_group(i);
    if (first.empty()) first = type;
    // Cards of this type in use on its least busy node (Slurm's count), plus ours submitted and not yet
    // running (Slurm does not count those yet): the type most likely to start soonest.
    long least = nodes_.empty() ? 0 : LONG_MAX;
    for (const auto& n : nodes_) {
      auto total = n.total.find(type);
      if (total == n.total.end() || total->second < devices || n.drained()) continue;
      auto used = n.used.find(type);
      least = std::min<long>(least, used == n.used.end() ? 0 : used->second);
    }
    if (least == LONG_MAX) continue;  // no node has this group
    long waiting = 0;
    for (const auto& [name, w] : watched_)
      if (w.group_type == type) {
        bool running = false;
        for (const auto& j : jobs_)
          if (j.name == name && !j.pending()) running = true;
        waiting += running ? 0 : w.devices;
      }
    long score = least + waiting;
    if (score < best_score) best_score = score, best = type;
  }
  // Groups of the type exist but no node shows one now (all drained, no snapshot yet): ask for the first,
  // never for untyped cards that could span two groups.
  return best.empty() ? first : best;
}

void SlurmCluster::command(std::vector<std::string> argv, std::function<void(const SlurmCommandResult&)> done) {
  boost::asio::post(*workers_, [this, argv = std::move(argv), done = std::move(done)] {
    SlurmCommandResult r = run_slurm_command(argv);
    if (!r.ok()) spdlog::warn("slurm: {} failed: {}", argv[0] + (argv.size() > 1 ? " " + argv[1] : ""), r.why());
    if (done) boost::asio::post(io_, [done, r] { done(r); });
  });
}

void SlurmCluster::poke() {
  {
    std::lock_guard<std::mutex> g(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

void SlurmCluster::poll_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    std::vector<SlurmJob> jobs;
    std::vector<SlurmNode> nodes;
    std::string problem;
    SlurmCommandResult q = run_slurm_command({"squeue", "--json"}, 10);
    if (!q.ok()) problem = "squeue --json: " + q.why();
    else if (!parse_squeue_json(q.out, jobs, problem)) jobs.clear();  // (the parsers catch what they throw)
    SlurmCommandResult s = run_slurm_command({"sinfo", "--json"}, 10);
    if (!s.ok()) problem += (problem.empty() ? "" : "; ") + std::string("sinfo --json: ") + s.why();
    else if (std::string e; !parse_sinfo_json(s.out, cfg_.gres, nodes, e)) problem += (problem.empty() ? "" : "; ") + e;
    boost::asio::post(io_, [this, jobs = std::move(jobs), nodes = std::move(nodes), problem]() mutable {
      take_snapshot(std::move(jobs), std::move(nodes), std::move(problem));
    });
    lock.lock();
    const double period = watching_ > 0 ? cfg_.poll_seconds : 5.0;
    cv_.wait_for(lock, std::chrono::duration<double>(period), [this] { return stop_ || poked_; });
    poked_ = false;
  }
}

void SlurmCluster::take_snapshot(std::vector<SlurmJob> jobs, std::vector<SlurmNode> nodes, std::string problem) {
  if (problem != problem_ && !problem.empty()) spdlog::warn("slurm: cannot read the cluster's state: {}", problem);
  problem_ = std::move(problem);
  if (problem_.empty() || !nodes.empty()) nodes_ = std::move(nodes);
  if (!problem_.empty() && jobs.empty()) return;  // keep the last view rather than show nothing
  jobs_.clear();
  for (auto& j : jobs)
    if (ours(j) && j.active()) jobs_.push_back(std::move(j));
  for (const auto& j : jobs_)
    if (auto w = watched_.find(j.name); w != watched_.end() && w->second.on_update) w->second.on_update(j);
  for (const auto& [id, l] : listeners_) l();
  if (on_change_) on_change_();
}

SlurmCommandResult SlurmCluster::set_node_drained(const std::string& node, bool drain, const std::string& reason) {
  // Running jobs finish; no new ones start there; the reason shows in sinfo and in our status.
  std::vector<std::string> argv = {"scontrol", "update", "NodeName=" + node};
  if (drain) argv.insert(argv.end(), {"State=DRAIN", "Reason=" + reason});
  else argv.push_back("State=RESUME");
  SlurmCommandResult r = run_slurm_command(argv, 10);
  if (r.ok()) poke();
  return r;
}

std::vector<std::string> SlurmCluster::cancel_leftovers(const std::set<std::string>& keep) {
  std::vector<std::string> said;
  SlurmCommandResult q = run_slurm_command({"squeue", "--json"});
  std::vector<SlurmJob> jobs;
  std::string error;
  if (!q.ok() || !parse_squeue_json(q.out, jobs, error)) {
    said.push_back("cannot list Slurm jobs to cancel what a previous daemon left: " + (q.ok() ? error : q.why()));
    return said;
  }
  for (const auto& j : jobs) {
    if (!ours(j) || !j.active() || keep.count(j.name)) continue;
    SlurmCommandResult c = run_slurm_command({"scancel", j.id});
    said.push_back("cancelled Slurm job " + j.id + " (" + j.comment.substr(j.comment.find(" run=") + 1) + ", " +
                   j.state + ") left by a previous daemon" + (c.ok() ? "" : ": scancel failed: " + c.why()));
  }
  return said;
}

}  // namespace pto
