#include "plan/probe_plan.h"

namespace pto {

std::string keep_for_probe(Plan& plan, const std::string& job, const std::string& step, const std::vector<std::string>& tests) {
  bool found_job = false;
  for (PlanJob& j : plan.jobs) {
    if (j.name != job) continue;
    found_job = true;
    // The last step that is the probed one: its name, or for a split step its collection and shards.
    int last = step.empty() ? static_cast<int>(j.steps.size()) - 1 : -1;
    for (std::size_t s = 0; s < j.steps.size() && !step.empty(); ++s) {
      const std::string& n = j.steps[s].name;
      const bool part_of_split = (j.steps[s].split_shards || j.steps[s].shard) && n.rfind(step + " (", 0) == 0;
      if (n == step || part_of_split) last = static_cast<int>(s);
    }
    if (last < 0) return "no step '" + step + "' in job '" + job + "' (" + j.file + ")";
    j.steps.resize(static_cast<std::size_t>(last) + 1);  // later steps are not the probe's
    for (PlanStep& s : j.steps) {
      if (s.deduplicated_from && *s.deduplicated_from > last) s.deduplicated_from.reset();
      const PlanStep& last_kept = j.steps.back();
      const bool probed = step.empty() ? (&s == &last_kept || (s.shard && last_kept.shard && s.collect_step == last_kept.collect_step))
                                       : s.name == step || (s.shard && s.name.rfind(step + " (", 0) == 0);
      if (probed && !tests.empty()) s.only_tests = tests;
    }
    // Its outputs may name steps that are gone: they are not the probe's to compute.
    j.outputs.clear();
  }
  if (!found_job) return "no job '" + job + "' at this commit";
  return "";
}

}  // namespace pto
