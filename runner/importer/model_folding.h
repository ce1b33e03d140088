#pragma once
// Folding an imported job's example steps into models: steps that run one script command on several examples
// (`python DIR/EXAMPLE.py ARGS`), differing in nothing but their example and arguments, become models/<name>.yml
// (the arguments every example shares stay in its command) and a `models:` step; a copy-pasted step (same
// example, same arguments) is the same work, imported once and said so in `notes`.
#include <set>
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "importer/imported_tree.h"

namespace pto::imported {

/// Marks the folded steps of `job` (their model, example, args, repeats); `used_model_ids` keeps ids unique
/// across the import.
std::vector<Model> fold_models(Job& job, std::set<std::string>& used_model_ids, const std::string& display, Diagnostics& notes);

}  // namespace pto::imported
