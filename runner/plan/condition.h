#pragma once
// The expression language pto-runner understands, for `if:` and inside `${{ }}`: success(), failure(),
// always(), cancelled(), !, &&, ||, (), true/false, 'strings', numbers, == and !=, and the contexts
// matrix.NAME, env.NAME, steps.ID.outputs.NAME, steps.ID.outcome, steps.ID.conclusion,
// needs.JOB.outputs.NAME and needs.JOB.result; an `if:` may be wrapped in ${{ }}.
//
// As in GitHub Actions, an `if:` that calls no status function behaves as `success() && (expr)`, `&&` and
// `||` yield one of their operands (so `${{ steps.a.outputs.x || 'default' }}` works), and == compares
// strings case-insensitively.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pto {

struct ConditionContext {
  bool any_failed = false;  // a need (for jobs) or an earlier step (for steps) failed
  bool cancelled = false;   // the run is being cancelled
  std::map<std::string, std::string> matrix;
  std::map<std::string, std::string> env;
  /// steps.* and needs.* by their full path ("steps.build.outputs.version", "needs.prep.result").
  std::map<std::string, std::string> values;
};

class Condition {
 public:
  /// Parses `text`; on failure returns nothing and sets `error` (with the 1-based column inside `text`).
  static std::optional<Condition> parse(const std::string& text, std::string& error, int* error_col = nullptr);
  bool evaluate(const ConditionContext& ctx) const;
  /// The expression's value as text (for `${{ }}` in run, env, name, working-directory); no implied success().
  std::string value(const ConditionContext& ctx) const;
  /// Every context path the expression reads (`matrix.os`, `steps.build.outputs.version`), for load checks.
  std::vector<std::string> contexts() const;
  /// Whether the expression calls success/failure/always/cancelled itself.
  bool has_status_function() const { return has_status_; }

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  bool has_status_ = false;
};

/// An empty condition means `success()`.
bool evaluate_condition_text(const std::string& text, const ConditionContext& ctx);

}  // namespace pto
