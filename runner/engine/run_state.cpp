#include "engine/run_state.h"

namespace pto {

std::string to_string(StepState s) {
  switch (s) {
    case StepState::Pending: return "pending";
    case StepState::Waiting: return "waiting";
    case StepState::Running: return "running";
    case StepState::Succeeded: return "succeeded";
    case StepState::Failed: return "failed";
    case StepState::TimedOut: return "timed_out";
    case StepState::Cancelled: return "cancelled";
    case StepState::Skipped: return "skipped";
    case StepState::Deduplicated: return "deduplicated";
    case StepState::Interrupted: return "interrupted";
    case StepState::Reused: return "reused";
  }
  return "?";
}

std::string to_string(JobState s) {
  switch (s) {
    case JobState::Pending: return "pending";
    case JobState::Running: return "running";
    case JobState::Succeeded: return "succeeded";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
    case JobState::Skipped: return "skipped";
  }
  return "?";
}

bool is_final(StepState s) {
  return s != StepState::Pending && s != StepState::Waiting && s != StepState::Running;
}

bool is_final(JobState s) { return s != JobState::Pending && s != JobState::Running; }

}  // namespace pto
