#pragma once
// The lease endpoints' field names, for the daemon that answers (server/requests, lease/lease_desk) and for
// the task-submit drop-in that asks (task_submit/): one spelling each. Header only: task-submit is its own
// small binary.
namespace pto::lease_wire {

// POST /api/v1/leases
inline constexpr const char* kDevices = "devices";
inline constexpr const char* kDeviceIds = "device-ids";
inline constexpr const char* kDeviceType = "device-type";
inline constexpr const char* kMaxSeconds = "max-seconds";
inline constexpr const char* kWaitSeconds = "wait-seconds";
inline constexpr const char* kLabel = "label";
inline constexpr const char* kTest = "test";  // the pytest test it was taken from (PYTEST_CURRENT_TEST), if any
inline constexpr const char* kWaitingSince = "waiting-since";  // asked again after its daemon went away: first asked then (epoch s)

// Its answer once granted (201), and each lease in GET /api/v1/leases
inline constexpr const char* kId = "id";
inline constexpr const char* kCards = "cards";
inline constexpr const char* kMarker = "marker";      // PTO_RUNNER_STEP_MARK of the command
inline constexpr const char* kCgroup = "cgroup";      // the cgroup the command joins ("" without cgroups)
inline constexpr const char* kSrun = "srun";          // executor: slurm: the command line to run it through
inline constexpr const char* kState = "state";
inline constexpr const char* kLeases = "leases";
inline constexpr const char* kError = "error";
// DELETE /api/v1/leases/ID?reason=...: the client's own release after its command ended
inline constexpr const char* kReleasedByClient = "released by its client";
// ... with a body saying how its command ended, evidence for the lease's cards (engine/failure_evidence):
inline constexpr const char* kExitCode = "exit-code";  // -1 when it was killed by a signal
inline constexpr const char* kSignal = "signal";
inline constexpr const char* kOutput = "output";  // its harness marker lines and the last lines it printed

}  // namespace pto::lease_wire
