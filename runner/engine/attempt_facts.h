#pragma once
// What an attempt of a step that just ended leaves to judge it by: its part of the log and the cards it ran
// on. Shared by the causes (engine/engine_health.cpp) and the test cases (engine/engine_cases.cpp).
#include <string>
#include <vector>

#include "engine/run_state.h"

namespace pto {

/// The log of the attempt that just ended: what follows the last "pto-runner: attempt N" line, at most 1 MiB.
std::string attempt_log(const std::string& path);

/// Every card the attempt ran on: its own and those its harness leased, sorted.
std::vector<int> attempt_cards(const StepRecord& sr);

}  // namespace pto
