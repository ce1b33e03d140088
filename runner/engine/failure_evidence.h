#pragma once
// Which cause a failed attempt is charged to, and the evidence (SPEC "Every red is true"). Pure: told how the
// attempt ended, on which cards, what its log says, and the host's health settings. In order:
//   timeout    it ran out of time (a step's timeout-minutes);
//   card/infra a line of its log matches a `health.fault-patterns` entry (the card its group names, else the
//              step's cards); or pypto's harness markers (`PYPTO_EXEC_RESULT=FAIL|INFRA device=N`, one per
//              case) put its failed cases on some of the cards its cases ran on only (INFRA: the host); or its
//              exit code or signal is in health.infra-exit-codes/-signals; or the host failed it (its output
//              could not be kept, processes of it outlived it);
//   code       anything else: it would fail wherever it ran.
// Whether a card that fails other runs' work makes a plain failure the card's is the card's health to say
// (sched/device_pool), not this file's; `flaky` is decided later, when a retry passes.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/runner_config.h"

namespace pto {

struct AttemptEnd {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool host_problem = false;  // its output could not be kept, or processes of it outlived it
  std::vector<int> cards;
};

struct FailureEvidence {
  FailureCause cause = FailureCause::Code;
  std::string reason;        // why that cause, one line: "the log names a card fault: 507018"
  std::string matched_line;  // the log line a pattern or marker matched ("" none)
  std::string pattern;       // the fault pattern that matched ("" none)
  std::vector<int> cards;    // the cards it is charged to (card, infra); empty for code and timeout
  nlohmann::json json() const;
};

/// `log` is (the tail of) the attempt's log.
FailureEvidence classify_failure(const AttemptEnd& end, const HealthConfig& health, std::string_view log);

}  // namespace pto
