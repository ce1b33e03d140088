#include "bisect/host_questions.h"

#include <algorithm>

#include "read_model/read_model.h"

namespace pto {

HostQuestions::HostQuestions(ProbeHost probes, GitMirror* mirror, const std::string& main_ref,
                             std::function<RunEngine*(const std::string& run)> engine_of, ReadModel& model, std::function<void()> changed,
                             std::function<void(const Bisection&)> bisection_ended)
    : controls_(probes, mirror, main_ref, engine_of, changed),
      comparisons_(probes, mirror, main_ref, std::move(engine_of), std::move(changed)),
      bisections_(
          probes, mirror,
          [&model](const std::string& id, nlohmann::json shown) {  // newest first, as the API lists them
            auto at = std::find_if(model.bisections.begin(), model.bisections.end(), [&](const nlohmann::json& b) { return b["id"] == id; });
            if (at != model.bisections.end()) *at = std::move(shown);
            else model.bisections.insert(model.bisections.begin(), std::move(shown));
          },
          std::move(bisection_ended)) {}

void HostQuestions::run_finished(const std::string& run, const RunRecord& record, const Plan& plan, const std::string& sha) {
  bisections_.probe_finished(run, record, plan, sha);
  controls_.finished(run, record, plan);
  comparisons_.finished(run);
}

}  // namespace pto
