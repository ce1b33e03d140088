#pragma once
// What a failed step, lease or harness case is charged to (SPEC "Every red is true"): the commit's code, a
// flaky test, a card, the host, or its time bound. Named here because the definitions (`retry.on`) and
// runner.yml (`health.fault-patterns`) name them; engine/failure_evidence decides which one a failure gets.
#include <optional>
#include <string>

namespace pto {

enum class FailureCause { Code, Flaky, Card, Infra, Timeout };

inline std::string to_string(FailureCause c) {
  switch (c) {
    case FailureCause::Code: return "code";
    case FailureCause::Flaky: return "flaky";
    case FailureCause::Card: return "card";
    case FailureCause::Infra: return "infra";
    case FailureCause::Timeout: return "timeout";
  }
  return "code";
}

inline std::optional<FailureCause> failure_cause_named(const std::string& s) {
  for (FailureCause c : {FailureCause::Code, FailureCause::Flaky, FailureCause::Card, FailureCause::Infra, FailureCause::Timeout})
    if (to_string(c) == s) return c;
  return std::nullopt;
}

}  // namespace pto
