#pragma once
// The `if:` subset pto-runner understands: success(), failure(), always(), cancelled(), !, &&, ||, (),
// true/false, 'strings', numbers, matrix.NAME, env.NAME, == and !=, optionally wrapped in ${{ }}.
//
// As in GitHub Actions, an expression that calls no status function behaves as `success() && (expr)`.
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace pto {

struct ConditionContext {
  bool any_failed = false;  // a need (for jobs) or an earlier step (for steps) failed
  bool cancelled = false;   // the run is being cancelled
  std::map<std::string, std::string> matrix;
  std::map<std::string, std::string> env;
};

class Condition {
 public:
  /// Parses `text`; on failure returns nothing and sets `error` (with the 1-based column inside `text`).
  static std::optional<Condition> parse(const std::string& text, std::string& error, int* error_col = nullptr);
  bool evaluate(const ConditionContext& ctx) const;
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
