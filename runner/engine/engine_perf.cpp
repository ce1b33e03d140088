// RunEngine's part in perf steps (`perf:`, SPEC "Performance, judged like an experiment"): each execution of
// the step's command is one sample. The number comes from the sample's own output (its log from where it
// began), and every sample after the first asks for the very cards of the first (`only`: a card's own speed
// then cancels). Judged one of two ways:
// - against the ref's history on the card type (perf/history_change), once its samples are taken;
// - against another build (`compare: base` in a pull request's run, bisect/base_comparisons): after each
//   sample the step waits, its cards given back, until the comparer has the other build's sample on the same
//   card, and asks for the next sample (perf_next) or ends the step with its verdict (perf_settle).
// Either way its samples and verdict are kept (EngineOptions::perf); a gated step that got worse is red.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <fstream>

#include "engine/engine.h"
#include "config/device_spec.h"
#include "perf/history_change.h"
#include "util/clock.h"
#include "util/ids.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

/// What a sample wrote: the log from `offset`, at most its last 1 MiB (the number is printed at its end).
std::string sample_output(const std::string& log, std::uint64_t offset) {
  std::ifstream in(log, std::ios::binary);
  in.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(std::max<std::streamoff>(0, in.tellg()));
  const std::uint64_t from = std::max(offset, size > (1u << 20) ? size - (1u << 20) : 0);
  if (from >= size) return "";
  std::string text(size - from, '\0');
  in.seekg(static_cast<std::streamoff>(from));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

}  // namespace

void RunEngine::begin_perf_sample(std::size_t j, std::size_t s) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (!plan_.jobs[j].steps[s].perf || opts_.simulate) return;
  if (!sr.perf) sr.perf.emplace();
  std::error_code ec;
  const auto size = fs::file_size(sr.log_path, ec);
  sr.perf->log_offset = ec ? 0 : size;
}

bool RunEngine::take_perf_sample(std::size_t j, std::size_t s, const std::vector<int>& cards) {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  StepRecord& sr = run_.jobs[j].steps[s];
  const PerfSpec& spec = *ps.perf;
  if (!sr.perf) sr.perf.emplace();
  StepRecord::Perf& p = *sr.perf;
  const std::optional<double> value = spec.read(sample_output(sr.log_path, p.log_offset));
  if (!value) {
    sr.error = "perf: sample " + std::to_string(p.samples.size() + 1) + " printed no positive number matching '" + spec.metric + "'";
    sr.cause = "code";
    return false;
  }
  p.samples.push_back(*value);
  if (p.cards.empty()) p.cards = sr.cards;
  const int want = spec.sample_count();
  const bool paired = spec.compare == PerfSpec::Compare::Base && opts_.perf && opts_.perf->paired;
  std::ofstream(sr.log_path, std::ios::app) << "pto-runner: perf sample " << p.samples.size() << (paired ? "" : " of " + std::to_string(want))
                                            << ": " << number_text(*value) << (spec.unit.empty() ? "" : " " + spec.unit) << "\n";
  if (paired) {
    // Its cards go back while the other build measures on them; the comparer says what comes next.
    give_back_host(sr);
    release_cards(cards, false, label(j, s));
    sr.cards.clear();
    p.awaiting_pair = true;
    sr.wait_reason = std::string("perf: waiting for the other build's sample on ") + (p.cards.size() == 1 ? "card " : "cards ") + join_ids(p.cards);
    transition(j, s, StepState::Waiting);
    boost::asio::post(io_, [id = run_.id, j, s, hook = opts_.perf->paired] { hook(id, j, s); });
    pump();
    return true;
  }
  if (static_cast<int>(p.samples.size()) < want) {
    // The next sample: on the same cards, asked for again so the host's other work is not held up meanwhile.
    give_back_host(sr);
    release_cards(cards, false, label(j, s));
    sr.cards.clear();
    enqueue(j, s);
    pump();
    return true;
  }
  judge_perf(j, s);
  return false;
}

std::vector<int> RunEngine::perf_cards(std::size_t j, std::size_t s) const {
  const StepRecord& sr = run_.jobs[j].steps[s];
  if (!plan_.jobs[j].steps[s].perf || opts_.simulate) return {};
  if (sr.perf && !sr.perf->cards.empty()) return sr.perf->cards;
  // The other side of a comparison measures on the cards the pull request's build measured on.
  if (opts_.perf && static_cast<int>(opts_.perf->cards.size()) == plan_.jobs[j].steps[s].devices) return opts_.perf->cards;
  return {};
}

void RunEngine::judge_perf(std::size_t j, std::size_t s) {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  StepRecord& sr = run_.jobs[j].steps[s];
  const PerfSpec& spec = *ps.perf;
  StepRecord::Perf& p = *sr.perf;
  // Worse is always "slower" to the judgement: a higher-is-better number is judged by its inverse.
  auto worse_up = [&](double v) { return spec.lower_is_better ? v : 1 / v; };
  if (!opts_.perf) {
    p.verdict = "not judged: this run keeps no perf history";
    keep_perf(j, s);
    return;
  }
  std::vector<RunMedian> series;
  if (opts_.perf->series)
    for (const PerfRecord& r : opts_.perf->series(spec.name, ps.device_type))
      if (r.run != run_.id && r.median > 0) series.push_back({r.run, r.commit, worse_up(r.median)});
  series.push_back({run_.id, opts_.perf->commit, worse_up(median_of(p.samples))});
  HistoryOptions ho;
  ho.threshold = spec.threshold_pct / 100;
  const HistoryVerdict v = judge_history(series, ho);
  p.change = v.kind == HistoryVerdict::Kind::Slower   ? "slower"
             : v.kind == HistoryVerdict::Kind::Faster ? "faster"
             : v.kind == HistoryVerdict::Kind::NoChange ? "none"
                                                        : "";
  p.verdict = v.text(ho.threshold);
  if (!spec.lower_is_better && (v.kind == HistoryVerdict::Kind::Slower || v.kind == HistoryVerdict::Kind::Faster))
    p.verdict.replace(0, p.verdict.find(' '), v.kind == HistoryVerdict::Kind::Slower ? "worse" : "better");
  // `compare: base` with no other build to pair with (a run of main, or no commits here): its history.
  if (spec.compare == PerfSpec::Compare::Base) p.verdict += " (against this ref's history: no merge base to compare with here)";
  keep_perf(j, s);
  if (spec.gate && v.kind == HistoryVerdict::Kind::Slower && v.began_now) {
    sr.error = "perf: " + p.verdict;
    sr.cause = "code";
  }
}

void RunEngine::keep_perf(std::size_t j, std::size_t s) {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  StepRecord& sr = run_.jobs[j].steps[s];
  const PerfSpec& spec = *ps.perf;
  StepRecord::Perf& p = *sr.perf;
  PerfRecord rec;
  rec.metric = spec.name;
  rec.unit = spec.unit;
  rec.card_type = ps.device_type;
  rec.run = run_.id;
  rec.step = StepId{j, s}.text();
  rec.at = epoch_now();
  rec.samples = p.samples;
  rec.base_samples = p.base_samples;
  rec.cards = p.cards;
  rec.median = median_of(p.samples);
  rec.verdict = p.verdict;
  rec.change = p.change;
  sr.verdict = spec.name + ": median " + number_text(rec.median) + (spec.unit.empty() ? "" : " " + spec.unit) + " over " +
               std::to_string(p.samples.size()) + " samples on " + (p.cards.empty() ? "no card" : (p.cards.size() == 1 ? "card " : "cards ") + join_ids(p.cards)) +
               "; " + p.verdict;
  if (opts_.perf) {
    rec.ref = opts_.perf->ref;
    rec.commit = opts_.perf->commit;
    if (opts_.perf->record) opts_.perf->record(rec);
  }
}

void RunEngine::perf_next(std::size_t j, std::size_t s) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (!sr.perf || !sr.perf->awaiting_pair || sr.state != StepState::Waiting) return;
  sr.perf->awaiting_pair = false;
  enqueue(j, s);
  pump();
}

void RunEngine::perf_settle(std::size_t j, std::size_t s, const std::string& verdict, const std::string& change,
                            const std::vector<double>& other_samples, bool red) {
  JobRecord& jr = run_.jobs[j];
  StepRecord& sr = jr.steps[s];
  const PlanStep& ps = plan_.jobs[j].steps[s];
  if (!sr.perf || !sr.perf->awaiting_pair || sr.state != StepState::Waiting) return;
  sr.perf->awaiting_pair = false;
  sr.wait_reason.clear();
  sr.perf->verdict = verdict;
  sr.perf->change = change;
  sr.perf->base_samples = other_samples;
  keep_perf(j, s);
  if (red) {
    sr.error = "perf: " + verdict;
    sr.cause = "code";
    if (!ps.continue_on_error) jr.failed = true;
  }
  transition(j, s, red ? StepState::Failed : StepState::Succeeded);
  if (red && !ps.continue_on_error) fail_fast(j);
  pump();
}

}  // namespace pto
