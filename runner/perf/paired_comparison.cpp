#include "perf/paired_comparison.h"

#include <boost/math/distributions/students_t.hpp>

#include <cmath>
#include <cstdio>
#include <numeric>

namespace pto {

namespace {

struct MeanSe {
  double mean = 0, se = 0;
  int df = 1;
};

/// The mean log ratio, and its standard error from the two builds' own spread: both ran on one card in turns,
/// so each build's samples scatter by the jitter alone (the card's offset is common to all of them), and
/// var(ln b - ln a) = 2 s^2 with s^2 pooled from both builds, on 2n - 2 degrees of freedom where the pairs'
/// differences alone have n - 1. A slow drift only widens s (conservative); the mean is still the pairs'.
MeanSe mean_se(const std::vector<double>& d, const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(d.size());
  const double mean = std::accumulate(d.begin(), d.end(), 0.0) / n;
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double ss = 0;
  for (double x : a) ss += (x - ma) * (x - ma);
  for (double x : b) ss += (x - mb) * (x - mb);
  return {mean, std::sqrt(2 * ss / (2 * n - 2) / n), static_cast<int>(2 * n - 2)};
}

/// A look's one-sided level at information fraction `t` (0..1]: a power family (Kim and DeMets' shape, rho 1.5),
/// strict at the first looks and loosest at the last. Taken as each look's own level (not its increment), the
/// looks' levels are scaled (0.58 alpha at the last) so that all of them together keep false alarms within
/// `alpha`: bench/bench_perf_stats.cpp measures it (O'Brien-Fleming's shape, tried first, stops late: 20% took
/// 8.6 pairs on average against 6 wanted).
double look_level(double alpha, double t) { return 0.58 * alpha * std::pow(t, 1.5); }

double t_quantile(double p, int df) { return boost::math::quantile(boost::math::students_t(df), p); }

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", x * 100);
  return b;
}

}  // namespace

void PairedComparison::add(double a, double b) {
  if (a <= 0 || b <= 0) return;
  a_.push_back(std::log(a));
  b_.push_back(std::log(b));
  d_.push_back(b_.back() - a_.back());
}

PerfVerdict PairedComparison::verdict(PerfVerdict::Kind kind) const {
  const MeanSe m = mean_se(d_, a_, b_);
  const double t = t_quantile(0.975, m.df);
  PerfVerdict v;
  v.kind = kind;
  v.pairs = pairs();
  v.change = std::exp(m.mean) - 1;
  v.low = std::exp(m.mean - t * m.se) - 1;
  v.high = std::exp(m.mean + t * m.se) - 1;
  v.threshold = o_.threshold;
  v.beyond_threshold = (kind == PerfVerdict::Kind::Slower || kind == PerfVerdict::Kind::Faster) && std::fabs(v.change) > o_.threshold;
  return v;
}

std::optional<PerfVerdict> PairedComparison::look() const {
  const int n = pairs();
  if (n < std::max(2, o_.min_pairs) || ((n - o_.min_pairs) % o_.step != 0 && n < o_.max_pairs)) return std::nullopt;
  const MeanSe m = mean_se(d_, a_, b_);
  const double level = look_level(o_.alpha, std::min(1.0, static_cast<double>(n) / o_.max_pairs));
  const double t = t_quantile(1 - level, m.df);
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
    case Kind::NoChange: return "no change beyond +-" + pct(threshold) + ": " + pct(change) + ci + where;
    case Kind::Inconclusive: return "no significant change: " + pct(change) + ci + where;
  }
  return "";
}

}  // namespace pto
