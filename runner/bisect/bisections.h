#pragma once
// Bisections: the bisections a host runs (SPEC "Find the commit"; docs/maintainers.md, "Find the commit").
// What the policy (bisect/bisection) wants probed becomes probe runs of those commits, asked of the host
// (bisect/probe_host: made like any submission, trimmed to the probed step and what it needs, queued below
// everything else at kProbePriority). When a probe's run ends its verdict (bisect/probe_verdict) goes back to
// the policy; a run the policy no longer needs is cancelled. Every change is kept in the journal's file
// (store/bisection_journal), so a bisection goes on after a restart: the probes that were running are lost
// with their runs and run again. Engine thread only.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "bisect/bisection.h"
#include "bisect/probe_host.h"
#include "engine/run_state.h"
#include "plan/plan.h"
#include "util/answer.h"

namespace pto {

class BisectionJournal;
class GitMirror;

class Bisections {
 public:
  /// `mirror`: the commits' (null without runner.yml source: bisections are refused); `show`: a bisection's
  /// JSON for the read model, at every change; `ended`: once, when one ends (found or not).
  Bisections(ProbeHost host, GitMirror* mirror, std::function<void(const std::string& id, nlohmann::json shown)> show,
             std::function<void(const Bisection&)> ended);
  ~Bisections();

  /// Reads the journal's kept bisections (the 200 newest) and shows them; those that were running go on at
  /// resume(). "" or why bisections are off (they are then refused).
  std::string open(const std::string& journal_file);
  void resume();

  /// POST /api/v1/bisections: its path is git's to say, so it answers later.
  void start(BisectSpec spec, const std::string& by, Reply reply);
  Answer cancel(const std::string& id, const std::string& by);
  /// A finished run: when it was a probe, its verdict goes to its bisection (true); else false.
  bool probe_finished(const std::string& run, const RunRecord& record, const Plan& plan, const std::string& sha);

 private:
  struct Entry {
    std::unique_ptr<Bisection> b;
    std::string created, finished;
    std::set<int> submitting;  // probes whose runs are being made (their commits checked out)
  };
  /// Starts the probes `id` wants now.
  void pump(const std::string& id);
  /// Kept, shown, and when it ended told; then its next probes.
  void changed(const std::string& id);
  nlohmann::json shown(const Entry& e) const;

  ProbeHost host_;
  GitMirror* mirror_;
  std::function<void(const std::string&, nlohmann::json)> show_;
  std::function<void(const Bisection&)> ended_;
  std::map<std::string, Entry> bisections_;
  std::map<std::string, std::string> probe_runs_;  // a probe's run -> its bisection
  std::unique_ptr<BisectionJournal> journal_;
};

/// Below every ref's priority (runner.yml priorities go from -1000): a probe never runs ahead of a pull
/// request or the main branch.
constexpr int kProbePriority = -1001;

}  // namespace pto
