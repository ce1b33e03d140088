#pragma once
// The bodies of the API's mutations, checked field by field into types before anything acts on them: every
// refusal names its field (400 {"error", "field"}). Pure: no state, no host.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/bisection.h"
#include "config/runner_config.h"
#include "lease/lease.h"

namespace pto {

/// POST /api/v1/runs: {"jobs", "ref", "sha", "env", "secrets", "github"}.
struct RunSubmission {
  std::vector<std::string> jobs;
  std::string ref, sha;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> secrets;  // reach steps' env only; masked everywhere (util/secret_mask)
  nlohmann::json github;  // where the submission came from in GitHub Actions, with run_url
  nlohmann::json submitter;  // a local submitter's {uid, user} (server/access), set by the API, never by the body
  std::string attach;        // submit --attach: the workflow run's key (one pto-runner run per workflow run)
  /// `submit --control`: a red step of this run also runs on its merge base (bisect/control_runs).
  bool control = false;
  /// `submit --no-reuse` (`"reuse": false`): every step runs, none is taken from an earlier green result.
  bool reuse = true;
  /// A run the daemon makes itself, never from a body: a probe of one step (or of some tests of it) of one job
  /// (plan/probe_plan), at its own priority, for a bisection or a control run.
  struct Probe {
    std::string job, step;
    std::vector<std::string> tests;
    int priority = 0;
    std::string purpose;  // "bisection ID", "control of RUN"
    bool perf_base = false;  // the other build of a perf comparison, measuring on `cards` (bisect/base_comparisons)
    std::vector<int> cards;
    std::string perf_against;  // a perf bisection's probe: compared with this commit (`bisect --metric`)
  };
  std::optional<Probe> probe;
};

/// A refused body: the field at fault ("" for the body as a whole) and why.
struct BodyError {
  std::string field, message;
  nlohmann::json json() const { return {{"error", message}, {"field", field}}; }
};

std::optional<BodyError> parse_run_submission(const std::string& body, RunSubmission& out);
/// POST /api/v1/leases: {"devices", "device-ids", "device-type", "max-seconds", "wait-seconds", "label"}.
/// Whether the cards exist is the host's to say (lease/lease_desk).
std::optional<BodyError> parse_lease_request(const std::string& body, LeaseRequest& out);
/// DELETE /api/v1/leases/ID's body (optional): {"exit-code", "signal", "output"}, how its command ended.
std::optional<BodyError> parse_lease_report(const std::string& body, LeaseReport& out);
/// POST /api/v1/runs/ID/detach: {"client", "cancel"}.
/// POST /api/v1/tests/mute: {"id": GLOB, "reason": TEXT, "until": "YYYY-MM-DD"} (`today` or later).
std::optional<BodyError> parse_test_mute(const std::string& body, const std::string& today, TestMute& out);
/// POST /api/v1/bisections: {"good": SHA, "bad": SHA, "job": NAME, "step": NAME, "test": ID, "repeat": "auto"|N}.
std::optional<BodyError> parse_bisection(const std::string& body, BisectSpec& out);
/// POST /api/v1/tests/unmute: {"id": GLOB}.
std::optional<BodyError> parse_test_unmute(const std::string& body, std::string& glob);
std::optional<BodyError> parse_detach(const std::string& body, std::string& client, bool& cancel);
/// A drain's {"reason": ...}; the default when the body has none.
std::string drain_reason_of(const std::string& body);

}  // namespace pto
