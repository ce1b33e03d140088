#pragma once
// Diagnostics: every problem found in a user's file, with its place, severity and rule.
//
// Loaders never throw on bad input; they append here and carry on, so a user sees every problem of a file at
// once. Whether a finding means "the input cannot be used" (exit 2) or "lint found something" (exit 1) is
// decided by its rule, in one place: is_input_error().
#include <string>
#include <vector>

namespace pto {

/// A note says something the user should know that is neither wrong nor suspect (a check lint skipped, a
/// deliberate difference a baseline records): it never fails anything, --strict included.
enum class Severity { Error, Warning, Note };
std::string to_string(Severity s);

struct Diagnostic {
  std::string file;
  int line = 0;  // 1-based; 0 when the problem is about the whole file
  int col = 0;   // 1-based
  Severity severity = Severity::Error;
  std::string rule;
  std::string message;
};

/// Rules whose errors make the input files unusable (plan/run refuse them, exit 2). Everything else is a lint
/// finding (exit 1 when it is an error).
bool is_input_error_rule(const std::string& rule);

class Diagnostics {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  void error(const std::string& file, int line, int col, const std::string& rule, const std::string& message);
  void warning(const std::string& file, int line, int col, const std::string& rule, const std::string& message);
  void note(const std::string& file, int line, int col, const std::string& rule, const std::string& message);

  const std::vector<Diagnostic>& items() const { return items_; }
  /// For a pass that reclassifies findings (lint/drift_baseline: a deliberate difference becomes a note).
  std::vector<Diagnostic>& items_for_update() { return items_; }
  bool has_errors() const;
  bool has_input_errors() const;
  /// --strict: every warning becomes an error (notes stay notes).
  void promote_warnings();
  /// Sort by file, line, col so output is deterministic whatever order the checks ran in.
  void sort();

 private:
  std::vector<Diagnostic> items_;
};

/// `FILE:LINE:COL: error|warning|note: MESSAGE [RULE]`
std::string format_diagnostic(const Diagnostic& d);

}  // namespace pto
