// The perf comparison's statistics (perf/paired_comparison): pairs of one card's samples, a verdict with an
// interval, stopping at the looks. Power and false alarms on pypto's noise are bench/bench_perf_stats.cpp's.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "perf/paired_comparison.h"

using pto::PairedComparison;
using pto::PerfVerdict;

namespace {

/// Pairs of samples on one card with 8.5% log-normal jitter, B `change` slower, until the comparison stops.
PerfVerdict compare(double change, unsigned seed, double threshold = 0.04) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0, 0.085);
  PairedComparison c({threshold, 4, 16, 2, 0.05});
  while (true) {
    c.add(1000 * std::exp(jitter(rng)), 1000 * (1 + change) * std::exp(jitter(rng)));
    if (auto v = c.look()) return *v;
  }
}

}  // namespace

TEST_CASE("perf: a build 12% slower is found slower, with an interval that holds 12% and names the card and pairs", "[perf]") {
  int found = 0, covered = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const PerfVerdict v = compare(0.12, seed);
    found += v.kind == PerfVerdict::Kind::Slower;
    covered += v.low <= 0.12 && 0.12 <= v.high;
    CHECK(v.pairs <= 16);
    CHECK(v.pairs >= 4);
  }
  CHECK(found >= 17);    // the bench measures 96% power; 17 of 20 leaves room for these seeds
  CHECK(covered >= 17);  // a 95% interval
  const PerfVerdict v = compare(0.12, 3);
  REQUIRE(v.kind == PerfVerdict::Kind::Slower);
  CHECK(v.beyond_threshold);
  CHECK(v.text("3").find("slower by ") == 0);
  CHECK(v.text("3").find("(95% CI ") != std::string::npos);
  CHECK(v.text("3").find(" on card 3, " + std::to_string(v.pairs) + " pairs") != std::string::npos);
}

TEST_CASE("perf: an unchanged build is rarely called slower and then only after all its pairs, and a faster one is faster",
          "[perf]") {
  int slower = 0;
  for (unsigned seed = 100; seed < 140; ++seed) {
    const PerfVerdict v = compare(0, seed);
    slower += v.kind == PerfVerdict::Kind::Slower;
  }
  CHECK(slower <= 4);  // the bench measures 4.9% false alarms over 1,000 trials
  CHECK(compare(-0.25, 7).kind == PerfVerdict::Kind::Faster);
  // Identical numbers: no change at the first look, an interval of zero width.
  PairedComparison same({0.04, 4, 16, 2, 0.05});
  for (int i = 0; i < 3; ++i) {
    same.add(10, 10);
    CHECK_FALSE(same.look());  // before min-pairs there is no look
  }
  same.add(10, 10);
  REQUIRE(same.look());
  CHECK(same.look()->kind == PerfVerdict::Kind::NoChange);
  CHECK(same.look()->change == 0);
}

TEST_CASE("perf: the looks come every step pairs from min-pairs, and max-pairs always gives a verdict", "[perf]") {
  PairedComparison c({0.01, 4, 8, 2, 0.05});
  const double noisy[][2] = {{100, 110}, {100, 92}, {100, 104}, {100, 97}, {100, 101}, {100, 99}, {100, 103}, {100, 98}};
  for (int i = 0; i < 8; ++i) {
    c.add(noisy[i][0], noisy[i][1]);
    const bool at_look = i + 1 == 4 || i + 1 == 6 || i + 1 == 8;
    if (!at_look) CHECK_FALSE(c.look());
  }
  REQUIRE(c.look());
  CHECK(c.look()->pairs == 8);
  CHECK(c.look()->kind == PerfVerdict::Kind::Inconclusive);
  CHECK(c.look()->text().find("no significant change") == 0);
}
