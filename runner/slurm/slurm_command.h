#pragma once
// Talking to Slurm through its own commands (squeue, sinfo, scancel, scontrol), as a Slurm user would: each
// is run to completion with a timeout, and what they print in JSON (22.05's `squeue --json`, `sinfo --json`)
// is parsed into plain values here, in one place. Blocking: call from a worker thread, never the engine's.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pto {

struct SlurmCommandResult {
  int exit_code = -1;
  std::string out, err;
  std::string error;  // could not run it, or it timed out
  bool ok() const { return error.empty() && exit_code == 0; }
  /// One line for a log: the error, or the command's stderr.
  std::string why() const;
};

/// Runs a Slurm command found on PATH with the daemon's environment (SLURM_CONF and all).
SlurmCommandResult run_slurm_command(const std::vector<std::string>& argv, double timeout_seconds = 30);

struct SlurmJob {
  std::string id, name, comment, state, reason, node, partition;
  std::vector<int> cards;  // GRES indices on its node (IDX), once running
  std::int64_t submit_time = 0, start_time = 0;
  bool pending() const { return state == "PENDING"; }
  bool active() const;  // pending, running, or on its way to either or out of them
  /// Why it waits: Slurm's word ("Resources"; "submitted" before Slurm gave one), and as the status and the
  /// run record say it ("Slurm: Resources (job 52)").
  std::string slurm_reason() const { return reason.empty() || reason == "None" ? "submitted" : reason; }
  std::string wait_reason() const;
};

/// Our jobs are named after the marker of what they run (a step's RUN/JOB/STEP/ATTEMPT, a lease's
/// [RUN/]lease/ID): "pto-runner/MARKER". `marker_of_job` gives "" for a name not of that form.
std::string job_name_of(const std::string& marker);
std::string marker_of_job(const std::string& name);

struct SlurmNode {
  std::string name, state, reason, features;
  std::vector<std::string> flags;           // DRAIN, ...
  std::map<std::string, int> total, used;   // GRES type -> cards (the "" type: untyped)
  bool drained() const;
};

bool parse_squeue_json(const std::string& text, std::vector<SlurmJob>& out, std::string& error);
bool parse_sinfo_json(const std::string& text, const std::string& gres, std::vector<SlurmNode>& out, std::string& error);

/// The card indices in a GRES detail such as "npu:g1:2(IDX:2-3),npu:g0:0(IDX:)": {2, 3}.
std::vector<int> gres_indices(const std::string& detail);
/// Cards by GRES type for GRES `name` in "npu:g0:2,npu:g1:0(IDX:N/A)" or "npu:4": {g0: 2, g1: 0} or {"": 4}.
std::map<std::string, int> gres_counts(const std::string& text, const std::string& name);

}  // namespace pto
