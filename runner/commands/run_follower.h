#pragma once
// RunFollower: what `submit --wait` prints of a run it follows, one poll at a time: each step's start and end
// (with its cards and verdict), live output (`--follow`, through the offset-based log API), "still running"
// heartbeats, and where the first waiting step stands in the queue. An attached client (`--attach`) sees only
// its own jobs and what they need, and is done when they are.
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include "util/clock.h"

namespace pto {

/// "JOB / STEP" of a step in the run JSON.
std::string title_of(const nlohmann::json& job, const nlohmann::json& step);

class RunFollower {
 public:
  struct Options {
    bool follow = false;            // stream running steps' output
    double heartbeat_seconds = 300; // without follow: a line per long-running step this often
    bool attached = false;          // only `jobs` (and what they need) are this client's
    std::set<std::string> jobs;
  };
  /// `token` goes with every read (a daemon beyond loopback wants one).
  RunFollower(std::string server, std::string token, std::string run, Options options);
  using StepPlace = std::pair<std::size_t, std::size_t>;  // (job, step) indexes in the run JSON
  /// One poll: `run` is the run JSON as the API answered (an attached client's is cut to its jobs). What to
  /// print; `done` once the run, or this client's part of it, has ended. With `changed` (the steps a delta
  /// carried, commands/run_mirror) only those and the steps running are read, and with `queued` only those
  /// for the queue line: not every step of a run of thousands at every poll. Null: every step.
  std::string poll(nlohmann::json& run, bool& done, const std::set<StepPlace>* changed = nullptr,
                   const std::set<StepPlace>* queued = nullptr);
  /// Each waiting step's expected wait as first forecast (for the summary's Waited column).
  const std::map<std::string, double>& expected_wait() const { return expected_wait_; }

 private:
  /// An attached client's jobs: its own and what they need; the rest are cut from `run`. True when they ended.
  bool keep_own_jobs(nlohmann::json& run);
  void poll_logs(const nlohmann::json& job, const nlohmann::json& step, bool finished, std::string& out);
  /// What one step has to say since it was last read.
  void read_step(const nlohmann::json& job, const nlohmann::json& s, const StepPlace& place, std::chrono::steady_clock::time_point now,
                 std::string& text);

  struct Tail {
    std::uint64_t offset = 0;
    std::string partial;
  };
  std::string server_, token_, run_;
  Options options_;
  struct Seen {  // a step as last shown
    std::string state, verdict;
  };
  std::unordered_map<std::string, Seen> seen_;
  std::set<StepPlace> running_;  // as last read: read again at every poll (heartbeats, live output)
  std::map<std::string, std::chrono::steady_clock::time_point> running_since_, last_beat_;
  std::map<std::string, double> expected_wait_;
  std::map<std::string, Tail> tails_;
  std::string last_queue_line_;
  std::chrono::steady_clock::time_point last_queue_at_ = steady_now() - std::chrono::hours(1);
};

}  // namespace pto
