#pragma once
// `pto-runner import --workflow ci.yml --emit-workflow FILE`: the workflow a project merges to switch (SPEC "The
// switch-over"). Every NPU job (importer/workflow_import's `npu`) keeps its name (the required check), needs,
// if, runs-on, permissions, concurrency and timeout, and its steps become one `pto-runner submit --job NAME
// --attach` (one pto-runner run per workflow run), over the daemon's Unix socket, so a fork's pull request
// needs no secret; the commit is `github.sha` (a pull request's merge commit), passed through env:, never
// pasted into the script. Every other job is written back unchanged in meaning (yaml-cpp does not keep
// comments or layout: quoted scalars stay quoted, multi-line scripts stay literal blocks). A job running the
// cards' simulators is submitted the same way, from the NPU host (its runs-on becomes that host's labels).
#include <map>
#include <string>
#include <vector>

#include "config/diagnostics.h"

namespace pto {

/// The emitted workflow's text; `submitted` are the ids whose steps are replaced, each with the runs-on its job
/// takes (empty: its own; importer/workflow_import's submitted_jobs).
std::string emit_switch_workflow(const std::string& path, const std::string& display,
                                 const std::map<std::string, std::vector<std::string>>& submitted, const std::string& socket,
                                 Diagnostics& diags);

}  // namespace pto
