#pragma once
// strategy.matrix expansion with GitHub Actions semantics: the product of the axes in file order, minus every
// combination matching an `exclude` entry, then each `include` entry either extends every combination whose
// original values it does not contradict, or, when it extends none, becomes a combination of its own.
#include <string>
#include <utility>
#include <vector>

#include "config/job_file.h"

namespace pto {

using MatrixLeg = std::vector<std::pair<std::string, std::string>>;

/// GitHub Actions refuses more than 256 legs; so does pto-runner, before building them.
constexpr std::size_t kMaxMatrixLegs = 256;

struct MatrixExpansion {
  std::vector<MatrixLeg> legs;
  std::string error;  // non-empty when the matrix has too many legs
};

MatrixExpansion expand_matrix(const MatrixDef& def, std::size_t limit = kMaxMatrixLegs);

/// `base (v1, v2)` as GitHub names matrix legs.
std::string leg_display_name(const std::string& base, const MatrixLeg& leg);

/// Replaces each `${{ matrix.NAME }}` in `text`; an unknown key is reported in `error` (the first problem) and
/// left as written. Other expressions are left for run time (plan/expression checks them).
std::string substitute_matrix(const std::string& text, const MatrixLeg& leg, std::string& error);

}  // namespace pto
