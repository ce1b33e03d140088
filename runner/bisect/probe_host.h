#pragma once
// What a host does for the questions asked on its cards (bisections, control runs: bisect/): it makes a probe
// run, one job's step (or some of its tests) at one commit, as any submission is made (its worktree, its
// definitions, the sandbox), at the priority given; it cancels one; it runs blocking git work off its engine
// thread. The daemon adapts its own run submission to this face (hosting/run_host_probes.cpp), so bisect/ knows
// nothing of the API or the daemon.
#include <functional>
#include <string>
#include <vector>

namespace pto {

/// A probe run to make.
struct ProbeRun {
  std::string job, step;           // step "" : the job's last
  std::vector<std::string> tests;  // only these tests of it ("" none: the whole step)
  std::string sha, ref;
  int priority = 0;
  std::string purpose;  // "bisection ID", "control of RUN": who asks, in logs and the queue
  /// The other build of a perf comparison (bisect/base_comparisons): its perf step measures on these cards and
  /// waits between its samples for the comparison's turns.
  bool perf_base = false;
  std::vector<int> cards;
  /// A probe of a perf bisection (`bisect --metric`): its perf step is compared with this commit's build on one
  /// card, and is red when significantly slower (bisect/base_comparisons).
  std::string perf_against;
};

/// How the host answered: the run's id, or why none was made. `commit_fault`: the commit's own fault (its
/// definitions do not load, or it lacks the step), not the host's.
struct ProbeAnswer {
  std::string run;
  std::string why;
  bool commit_fault = false;
};

struct ProbeHost {
  std::function<void(ProbeRun run, std::function<void(ProbeAnswer)> answered)> submit;
  std::function<void(const std::string& run, const std::string& why)> cancel;
  /// `work` on a worker that may wait on git (a fetch), then `then` back on the engine's thread.
  std::function<void(std::function<void()> work, std::function<void()> then)> git;
  /// The host no longer makes runs (it is stopping).
  std::function<bool()> stopping;
};

}  // namespace pto
