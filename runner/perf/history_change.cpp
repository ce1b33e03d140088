#include "perf/history_change.h"

#include <boost/math/distributions/students_t.hpp>

#include <cmath>
#include <cstdio>

namespace pto {

namespace {

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", x * 100);
  return b;
}

}  // namespace

namespace {

/// Runs [0, k) against [k, n) on the log medians: the change and its two-sided p (pooled t).
struct Split {
  double change = 0, p = 1;
};

Split split_at(const std::vector<double>& x, int k) {
  const int n = static_cast<int>(x.size()), a = k, b = n - k;
  double ma = 0, mb = 0;
  for (int i = 0; i < k; ++i) ma += x[i];
  for (int i = k; i < n; ++i) mb += x[i];
  ma /= a, mb /= b;
  double ss = 0;
  for (int i = 0; i < k; ++i) ss += (x[i] - ma) * (x[i] - ma);
  for (int i = k; i < n; ++i) ss += (x[i] - mb) * (x[i] - mb);
  const int df = a + b - 2;
  // Identical medians have no spread: any difference then counts, none does not.
  const double sp = std::sqrt(std::max(ss / df, 1e-12));
  const double t = std::fabs(mb - ma) / (sp * std::sqrt(1.0 / a + 1.0 / b));
  return {std::exp(mb - ma) - 1, 2 * (1 - boost::math::cdf(boost::math::students_t(df), t))};
}

}  // namespace

HistoryVerdict judge_history(const std::vector<RunMedian>& series, const HistoryOptions& o) {
  HistoryVerdict v;
  const int n = static_cast<int>(series.size());
  std::vector<double> x;
  for (const auto& r : series) x.push_back(std::log(r.median > 0 ? r.median : 1e-300));
  v.before = n - 1, v.after = 1;
  if (n < o.min_before + 1) {
    v.before = 0, v.after = n;
    return v;
  }
  auto settle = [&](const Split& sp, int k, double p) {
    v.change = sp.change, v.p = p;
    v.before = k, v.after = n - k;
    v.since_run = series[k].run, v.since_commit = series[k].commit;
    v.began_now = k == n - 1;
    v.kind = sp.change > 0 ? HistoryVerdict::Kind::Slower : HistoryVerdict::Kind::Faster;
  };
  // The question a run asks first: did it change with me? The run against all before it, at alpha / 2.
  const Split now = split_at(x, n - 1);
  if (now.p < o.alpha / 2 && std::fabs(now.change) > o.threshold) {
    settle(now, n - 1, now.p);
    return v;
  }
  // Else: did it change earlier, and since which run? The best split with at least two runs after it, at
  // alpha / 2 shared among the splits tried (Bonferroni).
  const int splits = n - 1 - o.min_before;
  int best_k = -1;
  Split best;
  for (int k = o.min_before; k < n - 1; ++k) {
    const Split sp = split_at(x, k);
    if (best_k < 0 || sp.p < best.p) best = sp, best_k = k;
  }
  if (best_k >= 0 && best.p * splits < o.alpha / 2 && std::fabs(best.change) > o.threshold) {
    settle(best, best_k, best.p * splits);
    return v;
  }
  v.kind = HistoryVerdict::Kind::NoChange;
  v.change = now.change, v.p = now.p;
  return v;
}

std::string HistoryVerdict::text(double threshold) const {
  const int runs = before + after;
  switch (kind) {
    case Kind::TooFew: return "no history to judge against yet (" + std::to_string(runs) + " run" + (runs == 1 ? "" : "s") + ")";
    case Kind::NoChange: return "no change beyond +-" + pct(threshold) + " over " + std::to_string(runs) + " runs";
    case Kind::Slower:
    case Kind::Faster:
      return std::string(kind == Kind::Slower ? "slower by " : "faster by ") + pct(std::fabs(change)) + " since run " + since_run +
             (since_commit.empty() ? "" : " (commit " + since_commit.substr(0, 12) + ")") + ": " + std::to_string(before) +
             " runs before, " + std::to_string(after) + " since";
  }
  return "";
}

}  // namespace pto
