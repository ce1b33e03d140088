#pragma once
// Writing an import's definitions as pto-runner's files: jobs/<id>.yml in GitHub Actions' vocabulary plus
// pto-runner's keys (devices, device-type, queue- and run-timeout-minutes, models:, parallel), and
// models/<id>.yml for folded examples; consecutive model steps with one name pattern become one `models:` step.
#include <string>
#include <vector>

#include "importer/imported_tree.h"

namespace pto::imported {

/// `display` names the workflow in each file's header comment.
std::string emit_job(const Job& job, const std::vector<Model>& models, const std::string& display);
std::string emit_model(const Model& m, const std::string& display);

}  // namespace pto::imported
