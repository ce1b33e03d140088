#pragma once
// What a probe run (a bisection's, a control run's: plan/probe_plan) says of the step it probed, or of one test
// of it: pass, fail (the code's: it failed, timed out or the test failed by itself), inconclusive (a card or
// the host failed it after its own retry elsewhere, it never ran because something before it failed, or the
// host failed the run), or missing (the test is not there). Every leg of a matrix job is a probe of the step:
// one failing leg fails it. Pure.
#include <string>

#include "bisect/bisection.h"
#include "engine/run_state.h"
#include "plan/plan.h"

namespace pto {

struct ProbeVerdict {
  ProbeOutcome outcome = ProbeOutcome::Inconclusive;
  std::string detail;  // the step's verdict, cause or why it said nothing
};

/// `r` and `p` are the probe run's (its plan trimmed: the probed step is the last of each leg of `job`).
ProbeVerdict judge_probe(const RunRecord& r, const Plan& p, const std::string& job, const std::string& test);

}  // namespace pto
