#include "perf/paired_comparison.h"

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <cmath>
#include <cstdio>
#include <numeric>

namespace pto {

namespace {

struct MeanSe {
  double mean = 0, se = 0;
};

MeanSe mean_se(const std::vector<double>& d) {
  const double n = static_cast<double>(d.size());
  const double mean = std::accumulate(d.begin(), d.end(), 0.0) / n;
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  return {mean, std::sqrt(ss / (n - 1) / n)};
}

/// A look's one-sided level at information fraction `t` (0..1]: O'Brien-Fleming's shape (Lan-DeMets), strict at
/// the first looks and near `alpha` at the last. Taken as each look's own level (not its increment), the looks
/// together would spend a little more than `alpha` (their tests are correlated, so less than the sum): `alpha`
/// is scaled by 0.7, which bench/bench_perf_stats.cpp measures to keep false alarms within it (4.9% at 0.05).
double look_level(double alpha, double t) {
  boost::math::normal z;
  return 2 * (1 - boost::math::cdf(z, boost::math::quantile(z, 1 - 0.7 * alpha / 2) / std::sqrt(t)));
}

double t_quantile(double p, int df) { return boost::math::quantile(boost::math::students_t(df), p); }

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", x * 100);
  return b;
}

}  // namespace

void PairedComparison::add(double a, double b) {
  if (a > 0 && b > 0) d_.push_back(std::log(b / a));
}

PerfVerdict PairedComparison::verdict(PerfVerdict::Kind kind) const {
  const MeanSe m = mean_se(d_);
  const double t = t_quantile(0.975, pairs() - 1);
  PerfVerdict v;
  v.kind = kind;
  v.pairs = pairs();
  v.change = std::exp(m.mean) - 1;
  v.low = std::exp(m.mean - t * m.se) - 1;
  v.high = std::exp(m.mean + t * m.se) - 1;
  v.beyond_threshold = (kind == PerfVerdict::Kind::Slower || kind == PerfVerdict::Kind::Faster) && std::fabs(v.change) > o_.threshold;
  return v;
}

std::optional<PerfVerdict> PairedComparison::look() const {
  const int n = pairs();
  if (n < std::max(2, o_.min_pairs) || ((n - o_.min_pairs) % o_.step != 0 && n < o_.max_pairs)) return std::nullopt;
  const MeanSe m = mean_se(d_);
  const double level = look_level(o_.alpha, std::min(1.0, static_cast<double>(n) / o_.max_pairs));
  const double t = t_quantile(1 - level, n - 1);
  if (m.se == 0) return verdict(m.mean > 0 ? PerfVerdict::Kind::Slower : m.mean < 0 ? PerfVerdict::Kind::Faster : PerfVerdict::Kind::NoChange);
  if (m.mean - t * m.se > 0) return verdict(PerfVerdict::Kind::Slower);
  if (m.mean + t * m.se < 0) return verdict(PerfVerdict::Kind::Faster);
  const double band = std::log1p(o_.threshold);
  if (m.mean - t * m.se > -band && m.mean + t * m.se < band) return verdict(PerfVerdict::Kind::NoChange);
  if (n >= o_.max_pairs) return verdict(PerfVerdict::Kind::Inconclusive);
  return std::nullopt;
}

std::string PerfVerdict::text(const std::string& card) const {
  const std::string where = (card.empty() ? "" : " on card " + card) + ", " + std::to_string(pairs) + " pairs";
  const std::string ci = " (95% CI " + pct(low) + " to " + pct(high) + ")";
  switch (kind) {
    case Kind::Slower: return "slower by " + pct(change) + ci + where;
    case Kind::Faster: return "faster by " + pct(-change) + ci + where;
    case Kind::NoChange: return "no change beyond the threshold: " + pct(change) + ci + where;
    case Kind::Inconclusive: return "no significant change: " + pct(change) + ci + where;
  }
  return "";
}

}  // namespace pto
