#pragma once
// `${{ }}` inside text (run, env values, name, working-directory, job outputs): finding them, checking at
// load what they read, and replacing them with their values when a step starts.
//
// The language inside is the one of `if:` (plan/condition). matrix.NAME is replaced when the plan is built
// (plan/matrix); everything else waits for run time, when earlier steps' outputs and needs' outputs exist.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plan/condition.h"

namespace pto {

/// What an expression may read where it is written.
struct ExpressionScope {
  std::set<std::string> matrix_keys;
  bool has_matrix = false;
  /// ids of the steps before this one in its job (for steps.ID.*); every step id for job outputs.
  std::set<std::string> step_ids;
  /// Why steps.* cannot be read here ("" when it can): a job's own env and if:, a parallel job's plain steps.
  std::string steps_unavailable;
  /// For needs.JOB.*: each needed job with the outputs it declares.
  std::map<std::string, std::set<std::string>> needs_outputs;
  std::string job;  // for messages
};

/// Checks one context path (`steps.build.outputs.version`) against `scope`; "" or the problem.
std::string check_context(const std::string& path, const ExpressionScope& scope);

/// Checks every `${{ }}` in `text`; "" or the first problem (with the expression quoted).
std::string check_expressions(const std::string& text, const ExpressionScope& scope);

/// Whether `text` holds a `${{`.
bool has_expression(const std::string& text);

/// Replaces every `${{ expr }}` with its value in `ctx` (unknown values are empty, as in GitHub).
std::string interpolate(const std::string& text, const ConditionContext& ctx);

}  // namespace pto
