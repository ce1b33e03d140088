#pragma once
// A lease as a value: what was asked for, what its client reported, and where it stands. Cards lent to tools
// that run work themselves (pypto's harness calls `task-submit` per batch of test cases) through the same
// queue as steps. The book that keeps leases is lease/lease_book; the API reads these types (server/requests).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/ids.h"

namespace pto {

struct LeaseRequest {
  int devices = 1;
  std::vector<int> device_ids;  // exactly these cards; empty: any `devices` cards
  std::string device_type;
  double max_seconds = 0;   // revoked this long after the grant (0: no limit)
  double wait_seconds = 0;  // refused when not granted within this long (0: wait as long as it takes)
  std::string label;        // what it runs, for the queue, --list and --find
  std::string test;         // the test (pytest's node id) that took it: its cards are that test's
  std::string run_id;       // the run whose step asked (its lease token), "" for an operator's
  std::optional<StepId> step;  // that step, when asked with its attempt's own token; else it ends with its run
  std::vector<int> avoid;   // never these cards (its step's retry elsewhere), unless device_ids names them
  /// Its client has asked for it since then (seconds since the epoch): a task-submit asking again after its
  /// daemon went away keeps its place in line (at most a day back). 0: asked now.
  double waiting_since = 0;
};

/// How a lease's command ended, as its client (task-submit) reports with the release: evidence for its cards.
struct LeaseReport {
  bool given = false;  // a client that said nothing (an older task-submit, curl) charges nothing
  int exit_code = -1;  // -1: killed by `signal`
  int signal = 0;
  std::string output;  // its harness marker lines and last lines (task_submit/output_tap)
  bool failed() const {
    return given && (exit_code != 0 || signal != 0 || output.find("PYPTO_EXEC_RESULT=FAIL") != std::string::npos ||
                     output.find("PYPTO_EXEC_RESULT=INFRA") != std::string::npos);
  }
};

/// Waiting for cards, holding them, or over: ended (by its client or a request) or revoked (by the daemon:
/// heartbeat, max-seconds, its run's end). An ended or revoked lease stays in the book while what ran under
/// it is killed.
enum class LeaseState { Waiting, Granted, Ended, Revoked };
std::string to_string(LeaseState s);

struct Lease {
  std::string id;
  LeaseState state = LeaseState::Waiting;
  LeaseRequest request;
  std::vector<int> cards;
  std::string marker;  // PTO_RUNNER_STEP_MARK of its processes
  std::string cgroup;  // its own cgroup (exec/cgroup_tree), which the client's command joins; "" without cgroups
  std::string created, granted, ended, end_reason;
  std::chrono::steady_clock::time_point last_heartbeat, granted_at;
  std::uint64_t ticket = 0;
  LeaseReport report;  // what its client said of its command when it released it
};

}  // namespace pto
