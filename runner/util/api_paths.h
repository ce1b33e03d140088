#pragma once
// The HTTP API's paths, for the daemon's routes and for every client of them (submit, status, devices,
// task-submit, the page and the tests' helpers): one spelling each.
#include <cstddef>
#include <string>

namespace pto::api_path {

inline constexpr const char* kHealthz = "/healthz";
inline constexpr const char* kMetrics = "/metrics";
inline constexpr const char* kStatus = "/api/v1/status";
inline constexpr const char* kRuns = "/api/v1/runs";
inline constexpr const char* kLeases = "/api/v1/leases";
inline constexpr const char* kDevices = "/api/v1/devices";
inline constexpr const char* kNodes = "/api/v1/nodes";
inline constexpr const char* kCards = "/api/v1/cards";
/// The test history: ?ref=R (flaky, muted, slowest, most failing), /{id} (one test, its id URL-encoded),
/// /mute and /unmute (admin).
inline constexpr const char* kTests = "/api/v1/tests";
inline constexpr const char* kPerf = "/api/v1/perf";
/// Bisections (POST admin; GET the list and /{id}; /{id}/cancel admin).
inline constexpr const char* kBisections = "/api/v1/bisections";
// The pages a person reads (each draws itself from the JSON above).
inline constexpr const char* kStatusPage = "/";
inline constexpr const char* kRunPages = "/runs";
inline constexpr const char* kCardsPage = "/cards";
inline constexpr const char* kTestsPage = "/tests";
inline constexpr const char* kPerfPage = "/perf";
inline constexpr const char* kBisectionPages = "/bisections";

inline std::string run(const std::string& id) { return std::string(kRuns) + "/" + id; }
inline std::string run_cancel(const std::string& id) { return run(id) + "/cancel"; }
inline std::string run_detach(const std::string& id) { return run(id) + "/detach"; }
/// Its test cases (?result=failed: each failed test at its last attempt) and its merged JUnit report.
inline std::string run_tests(const std::string& id) { return run(id) + "/tests"; }
inline std::string run_junit(const std::string& id) { return run(id) + "/junit.xml"; }
inline std::string run_page(const std::string& id) { return std::string(kRunPages) + "/" + id; }
/// `step` as util/ids writes it (JOB-STEP).
inline std::string step_log(const std::string& run_id, const std::string& step) { return run(run_id) + "/steps/" + step + "/log"; }
inline std::string bisection(const std::string& id) { return std::string(kBisections) + "/" + id; }
inline std::string bisection_cancel(const std::string& id) { return bisection(id) + "/cancel"; }
inline std::string bisection_page(const std::string& id) { return std::string(kBisectionPages) + "/" + id; }
inline std::string tests_mute() { return std::string(kTests) + "/mute"; }
inline std::string tests_unmute() { return std::string(kTests) + "/unmute"; }
inline std::string lease(const std::string& id) { return std::string(kLeases) + "/" + id; }
inline std::string lease_heartbeat(const std::string& id) { return lease(id) + "/heartbeat"; }
/// `action` is "drain" or "undrain".
inline std::string device(int card, const std::string& action) { return std::string(kDevices) + "/" + std::to_string(card) + "/" + action; }
inline std::string node(const std::string& name, const std::string& action) { return std::string(kNodes) + "/" + name + "/" + action; }

}  // namespace pto::api_path
