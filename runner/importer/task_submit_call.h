#pragma once
// The incumbent's `task-submit --device-num N --max-time T --timeout W --run "CMD"` call inside a workflow's
// run: script, read back into what pto-runner says with its own keys (cards, run and queue time bounds, the
// command with the escapes of its double quotes undone), and pypto's workspace layout mapped onto a run's tree.
#include <optional>
#include <string>
#include <vector>

namespace pto {

struct TaskSubmitCall {
  std::string command;  // --run, unescaped
  int devices = 1;
  bool device_named = false;  // --device with ids or a variable: the runner's card, now pto-runner's to pick
  std::optional<double> max_time, timeout;
  std::string device_type;
};

/// A number as the workflow writes one ("600", "0.5"), or nothing.
std::optional<double> number(const std::string& s);
/// The task-submit call of a run: script, and the text before and after it; options without an equivalent
/// are named in `problems`.
std::optional<TaskSubmitCall> find_task_submit(const std::string& run, std::string& before, std::string& after,
                                               std::vector<std::string>& problems);
/// pypto's layout: the job's checkout (`$GITHUB_WORKSPACE/<checkout>`) is the run's tree, `.`; its siblings
/// (`$GITHUB_WORKSPACE/X`) are the tree's siblings, `../X`.
std::string map_workspace(std::string s, const std::string& checkout);

}  // namespace pto
