#pragma once
// Expected durations learned from history, for steps nobody wrote `expected-minutes` for (pypto's
// definitions carry none). Without an estimate a step can never backfill ahead of a reservation, so the
// scheduler falls back toward FIFO; with one learned from the step's own past runs it backfills again.
//
// The estimate of a step is the 90th percentile of its newest successful runs (same step key, at most 20 kept
// in the journal), once it has at least kMinDurationSamples. A high percentile, because a backfilled step that
// overruns its estimate delays the multi-card step whose reservation it slipped in front of
// (bench/bench_schedule: p90 kept the makespan within 4.4% of exact estimates on every simulated day, p80 not).
// A hand-written expected-minutes always wins.
#include "plan/plan.h"
#include "store/journal.h"

namespace pto {

constexpr int kMinDurationSamples = 3;
constexpr double kLearnedPercentile = 0.9;

/// The `q` quantile of `samples` (nearest rank); 0 for none.
double percentile(std::vector<double> samples, double q);

/// Gives every step without a hand-written estimate its learned one (expected_source "history").
void apply_learned_durations(Plan& plan, const Journal& journal);

}  // namespace pto
