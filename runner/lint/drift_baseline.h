#pragma once
// `lint --workflow ci.yml --against DIR --baseline FILE`: the deliberate differences between a workflow and
// the definitions, checked in beside them, each with its reason, so the drift check can gate CI on a tree
// that differs on purpose (SPEC "A drift check that can gate CI"). A drift finding an entry matches becomes a
// note that says the reason; an entry that matches nothing is an error at its line (`stale-baseline`): a
// baseline cannot go stale silently, as the baseline files of other linters (rubocop, detekt) can.
//
// The file (YAML), a list:
//   - finding: "step 'Run on board' of job 'system-tests-a5': the card type"   # text of the finding
//     reason: "the definitions type the a5 job's cards; ci.yml picks them by runner label"
// `finding` is matched as a substring of the finding's message; `rule` (default drift) names which findings it
// may match: a workflow's own findings a gate must live with (pypto's `script-injection` of github.base_ref)
// can be recorded too, each with its reason.
#include <string>
#include <vector>

#include "config/diagnostics.h"

namespace pto {

struct BaselineEntry {
  std::string finding, reason, rule = "drift";
  int line = 0, col = 0;
};

/// Reads the baseline at `path` (shown as `display`); its problems (YAML, a missing reason) go to `diags`.
std::vector<BaselineEntry> load_drift_baseline(const std::string& path, const std::string& display, Diagnostics& diags);

/// Turns the drift findings the entries match into notes ("deliberate (REASON): MESSAGE") and reports each
/// entry that matched none as `stale-baseline` at its line of `display`.
void apply_drift_baseline(const std::vector<BaselineEntry>& entries, const std::string& display, Diagnostics& diags);

}  // namespace pto
