// The perf comparison's statistics on pypto's noise (issue 52), in process, seeded, 1,000 trials per case, side
// by side with pypto's perf_guard rule. Noise model, per sample, in logs: a per-card offset uniform in +-6%
// (the same card for both builds of a pair; perf_guard's baseline was measured on another card), a slow drift
// (a random walk of 0.2% a sample), and 8.5% jitter (pypto #1766: run-to-run jitter ~8.5%).
// perf_guard (pypto daily_ci.yml qwen3-perf): the mean of 5 samples against a committed baseline (itself the
// mean of 5 samples on a random card), a regression when more than 15% above it.
// Target: 10% found with >= 90% power and <= 5% false alarms within 16 pairs; 20% within 6 pairs.
// Usage: bench_perf_stats [trials]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "perf/paired_comparison.h"

namespace {

struct Card {
  std::mt19937_64& rng;
  double offset, drift = 0;
  double sample(double truth) {
    std::normal_distribution<double> jitter(0, 0.085), step(0, 0.002);
    drift += step(rng);
    return truth * std::exp(offset + drift + jitter(rng));
  }
};

double card_offset(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(-0.06, 0.06)(rng); }

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 1000;
  const double base = 1016.66;  // us, pypto's committed Qwen3-14B decode baseline
  std::printf("paired comparison (one card, A B A B, t interval of the log ratios with the builds' pooled spread, power-family\n"
              "looks every 2 pairs from 4 to 16, one-sided alpha 0.05) against perf_guard (mean of 5 against a baseline from another card,\n"
              "15%% threshold); %d seeded trials per case\n\n", trials);
  std::printf("%-10s %-22s %-18s %-22s\n", "change", "paired: says slower", "pairs used (mean)", "perf_guard: flags it");
  for (double r : {0.0, 0.05, 0.10, 0.12, 0.20}) {
    std::mt19937_64 rng(20261205 + static_cast<unsigned>(r * 1000));
    int slower = 0, guard = 0;
    long pairs = 0;
    for (int t = 0; t < trials; ++t) {
      Card card{rng, card_offset(rng)};
      pto::PairedComparison c({0.04, 4, 16, 2, 0.05});
      std::optional<pto::PerfVerdict> v;
      while (!v) {
        const double a = card.sample(base);
        const double b = card.sample(base * (1 + r));
        c.add(a, b);
        v = c.look();
      }
      slower += v->kind == pto::PerfVerdict::Kind::Slower;
      pairs += v->pairs;
      Card then{rng, card_offset(rng)}, now{rng, card_offset(rng)};
      double baseline = 0, mean = 0;
      for (int k = 0; k < 5; ++k) baseline += then.sample(base) / 5;
      for (int k = 0; k < 5; ++k) mean += now.sample(base * (1 + r)) / 5;
      guard += mean > baseline * 1.15;
    }
    std::printf("%-10s %-22s %-18.2f %-22s\n", (r == 0 ? std::string("none") : std::to_string(static_cast<int>(r * 100)) + "% slower").c_str(),
                (std::to_string(100.0 * slower / trials).substr(0, 5) + "%").c_str(), static_cast<double>(pairs) / trials,
                (std::to_string(100.0 * guard / trials).substr(0, 5) + "%").c_str());
  }
  std::printf("\n(\"none\": the rate of false alarms; otherwise the power.)\n");
  return 0;
}
