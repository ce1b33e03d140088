// Finding the commit that broke a step among 100 (issue 34): bisect/bisection against one probe per commit,
// for a step that fails with rate 1.0, 0.5 and 0.2 from its culprit on. Each probe is a run of a 10-minute
// step on one card; the culprit is drawn uniformly; 2,000 trials per row, the same seeds for both.
//   bisect:  --repeat auto (rate 1.0 also with --repeat 1, what a maintainer of a hard failure would ask)
//   linear:  every commit from the good one up, once each, until the first that fails (what a person does
//            with "[experiment, do not merge]" pull requests, one per commit)
// Prints probes (runs), card-minutes, and how often each names the true culprit.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bisect/bisection.h"

namespace {

constexpr int kCommits = 100;
constexpr double kStepMinutes = 10;

struct Tally {
  double runs = 0, right = 0, trials = 0;
};

std::vector<std::string> path_of(int n) {
  std::vector<std::string> out;
  for (int i = 1; i <= n; ++i) out.push_back(std::to_string(i));
  return out;
}

void bisect_trial(int repeat, int culprit, double p, std::mt19937& rng, Tally& t) {
  const auto path = path_of(kCommits);
  pto::Bisection b("b", pto::BisectSpec{"0", path.back(), "j", "s", "", repeat}, path);
  std::bernoulli_distribution fails(p);
  int next = 0, runs = 0;
  while (!b.done()) {
    std::vector<std::pair<std::string, int>> wave;
    for (int probe : b.wanted()) {
      const std::string run = std::to_string(++next);
      b.started(probe, run);
      wave.push_back({run, std::stoi(b.sha_of(probe))});
    }
    if (wave.empty()) break;
    for (const auto& [run, commit] : wave) {
      if (!b.has_run(run)) continue;
      ++runs;
      b.finished(run, commit >= culprit && fails(rng) ? pto::ProbeOutcome::Fail : pto::ProbeOutcome::Pass, "");
    }
  }
  t.runs += runs;
  t.right += b.culprit() && std::stoi(*b.culprit()) == culprit;
  t.trials += 1;
}

void linear_trial(int culprit, double p, std::mt19937& rng, Tally& t) {
  std::bernoulli_distribution fails(p);
  int runs = 0, named = kCommits;  // nothing failed: the bad commit itself is named
  for (int c = 1; c <= kCommits; ++c) {
    ++runs;
    if (c >= culprit && fails(rng)) {
      named = c;
      break;
    }
  }
  t.runs += runs;
  t.right += named == culprit;
  t.trials += 1;
}

void row(const char* name, double p, const Tally& t) {
  std::printf("  rate %.1f  %-26s probes %6.1f   card-minutes %7.0f   culprit named %5.1f%%\n", p, name, t.runs / t.trials,
              t.runs / t.trials * kStepMinutes, 100 * t.right / t.trials);
}

}  // namespace

int main() {
  std::printf("finding the culprit among %d commits (a %g-minute one-card step), 2,000 trials each\n", kCommits, kStepMinutes);
  for (double p : {1.0, 0.5, 0.2}) {
    Tally auto_t, one_t, linear_t;
    std::mt19937 pick(7), a(11), o(11), l(11);
    std::uniform_int_distribution<int> culprit(1, kCommits);
    for (int i = 0; i < 2000; ++i) {
      const int c = culprit(pick);
      bisect_trial(0, c, p, a, auto_t);
      if (p == 1.0) bisect_trial(1, c, p, o, one_t);
      linear_trial(c, p, l, linear_t);
    }
    if (p == 1.0) row("bisect --repeat 1", p, one_t);
    row("bisect --repeat auto", p, auto_t);
    row("one probe per commit", p, linear_t);
  }
  return 0;
}
