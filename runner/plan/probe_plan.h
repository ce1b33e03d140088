#pragma once
// A probe's plan (bisection probes and control runs, SPEC "Find the commit"): of the plan of a commit, only what
// one step (or one test of it) needs: the job's legs with their steps up to that one (later steps are not run),
// and the jobs it needs (already all the plan holds when it was built for that job alone). Pure.
#include <string>
#include <vector>

#include "plan/plan.h"

namespace pto {

/// Trims `plan` (built with jobs = {job}) to a probe of `step` (a step's name; "" the job's last step; a split
/// step by its own name keeps its collection and shards) of `job`; with `tests`, that step runs only those
/// test ids. "" or why it cannot: no job or no step of that name at this commit.
std::string keep_for_probe(Plan& plan, const std::string& job, const std::string& step, const std::vector<std::string>& tests);

}  // namespace pto
