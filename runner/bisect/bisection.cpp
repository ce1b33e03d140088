#include "bisect/bisection.h"

#include <algorithm>
#include <cmath>

namespace pto {

nlohmann::json BisectSpec::json() const {
  nlohmann::json j = {{"good", good}, {"bad", bad}, {"job", job}, {"step", step}, {"test", test},
                      {"repeat", repeat == 0 ? nlohmann::json("auto") : nlohmann::json(repeat)}};
  if (!metric.empty()) j["metric"] = metric;
  return j;
}

BisectSpec BisectSpec::from_json(const nlohmann::json& j) {
  BisectSpec s;
  s.good = j.value("good", "");
  s.bad = j.value("bad", "");
  s.job = j.value("job", "");
  s.step = j.value("step", "");
  s.test = j.value("test", "");
  s.repeat = j.contains("repeat") && j["repeat"].is_number_integer() ? j["repeat"].get<int>() : 0;
  s.metric = j.contains("metric") && j["metric"].is_string() ? j["metric"].get<std::string>() : "";
  return s;
}

std::string to_string(ProbeOutcome o) {
  switch (o) {
    case ProbeOutcome::Pass: return "pass";
    case ProbeOutcome::Fail: return "fail";
    case ProbeOutcome::Inconclusive: return "inconclusive";
    case ProbeOutcome::Missing: return "missing";
  }
  return "?";
}

std::string to_string(BisectState s) {
  switch (s) {
    case BisectState::Running: return "running";
    case BisectState::Found: return "found";
    case BisectState::Failed: return "failed";
    case BisectState::Cancelled: return "cancelled";
  }
  return "?";
}

namespace {

/// Repeats after which a commit failing with rate `p` passes them all with chance under 5%.
int repeats_for(double p) {
  if (p >= 0.95) return 1;
  return std::clamp(static_cast<int>(std::ceil(std::log(0.05) / std::log(1 - p))), 1, Bisection::kMaxRepeat);
}

/// The lower end of the Wilson score interval for `fails` of `runs` (z = 1.28: 80% two-sided, 90% below).
double wilson_lower(int fails, int runs) {
  const double z = 1.28, n = runs, ph = static_cast<double>(fails) / runs;
  return (ph + z * z / (2 * n) - z * std::sqrt(ph * (1 - ph) / n + z * z / (4 * n * n))) / (1 + z * z / n);
}

std::string short_sha(const std::string& sha) { return sha.substr(0, 12); }

}  // namespace

Bisection::Bisection(std::string id, BisectSpec spec, std::vector<std::string> path)
    : id_(std::move(id)), spec_(std::move(spec)), path_(std::move(path)) {
  hi_ = static_cast<int>(path_.size()) - 1;
  if (path_.empty()) {
    fail("no commits after " + short_sha(spec_.good) + " on the first-parent path to " + short_sha(spec_.bad) +
         ": is the good commit an ancestor of the bad one?");
    return;
  }
  if (spec_.repeat == 0) {
    ask(hi_, "measure", kMeasureBatch);
  } else {
    repeats_ = std::clamp(spec_.repeat, 1, kMaxRepeat);
    ask(hi_, "verify-bad", repeats_);
    ask(-1, "verify-good", repeats_);
  }
}

void Bisection::ask(int index, const std::string& phase, int count) {
  for (int i = 0; i < count; ++i) probes_.push_back({commit(index), index, phase, "", "", ""});
}

std::vector<int> Bisection::wanted() {
  std::vector<int> out;
  if (done()) return out;
  for (std::size_t i = 0; i < probes_.size(); ++i)
    if (probes_[i].run.empty() && probes_[i].result.empty()) out.push_back(static_cast<int>(i));
  return out;
}

bool Bisection::is_wanted(int probe) const {
  if (done() || probe < 0 || probe >= static_cast<int>(probes_.size())) return false;
  const Probe& p = probes_[static_cast<std::size_t>(probe)];
  return p.run.empty() && p.result.empty();
}

void Bisection::started(int probe, const std::string& run) { probes_.at(static_cast<std::size_t>(probe)).run = run; }

bool Bisection::has_run(const std::string& run) const {
  return std::any_of(probes_.begin(), probes_.end(), [&](const Probe& p) { return p.run == run && p.result.empty(); });
}

int Bisection::verdict(int index, const std::string& phase) const {
  int passes = 0, fails = 0;
  for (const Probe& p : probes_)
    if (p.index == index && p.phase == phase) passes += p.result == "pass", fails += p.result == "fail";
  if (phase == "measure") {
    const bool pending = std::any_of(probes_.begin(), probes_.end(), [&](const Probe& p) { return p.index == index && p.phase == phase && p.result.empty(); });
    if (fails >= kMeasureFails || passes + fails >= kMeasureMax) return fails > 0 ? 1 : 0;
    return pending ? -1 : -2;  // -2: this batch is in and says too little: another one
  }
  if (fails > 0) return 1;
  return passes >= repeats_ ? 0 : -1;
}

std::vector<std::string> Bisection::unneeded(int index, const std::string& phase) {
  std::vector<std::string> runs;
  for (Probe& p : probes_)
    if (p.index == index && p.phase == phase && p.result.empty()) {
      if (!p.run.empty()) runs.push_back(p.run);
      p.result = "unneeded";
    }
  return runs;
}

void Bisection::fail(const std::string& why) {
  state_ = BisectState::Failed;
  stage_ = "done";
  error_ = why;
}

std::vector<std::string> Bisection::finished(const std::string& run, ProbeOutcome outcome, const std::string& detail) {
  auto it = std::find_if(probes_.begin(), probes_.end(), [&](const Probe& p) { return p.run == run && p.result.empty(); });
  if (it == probes_.end() || done()) return {};
  return judged(*it, outcome, detail);
}

std::vector<std::string> Bisection::refused(int probe, ProbeOutcome outcome, const std::string& detail) {
  if (!is_wanted(probe)) return {};
  return judged(probes_.at(static_cast<std::size_t>(probe)), outcome, detail);
}

std::vector<std::string> Bisection::judged(Probe& probe, ProbeOutcome outcome, const std::string& detail) {
  probe.result = to_string(outcome);
  probe.detail = detail;
  const int index = probe.index;
  const std::string phase = probe.phase;
  if (outcome == ProbeOutcome::Missing) {
    fail((spec_.test.empty() ? "the step '" + spec_.step + "' of job '" + spec_.job + "'" : "the test " + spec_.test) +
         " does not exist at " + short_sha(commit(index)) + (detail.empty() ? "" : " (" + detail + ")") + ": not guessed");
    return stop(BisectState::Failed, error_);
  }
  if (outcome == ProbeOutcome::Inconclusive) {
    const auto said_nothing = std::count_if(probes_.begin(), probes_.end(), [&](const Probe& p) {
      return p.index == index && p.phase == phase && p.result == "inconclusive";
    });
    if (said_nothing >= kMaxInconclusive) {
      fail(short_sha(commit(index)) + " could not be judged: " + std::to_string(said_nothing) + " probes failed by a card or the host (" +
           detail + ")");
      return stop(BisectState::Failed, error_);
    }
    ask(index, phase, 1);  // again (its run's own retry already went to other cards)
  }
  return advance();
}

std::vector<std::string> Bisection::advance() {
  std::vector<std::string> cancel;
  auto take = [&](std::vector<std::string> more) { cancel.insert(cancel.end(), more.begin(), more.end()); };
  if (stage_ == "verify") {
    if (spec_.repeat == 0) {
      const int bad = verdict(hi_, "measure");
      if (bad == -2) ask(hi_, "measure", kMeasureBatch);
      if (bad < 0) return cancel;
      if (failure_rate_ < 0) {
        take(unneeded(hi_, "measure"));
        int fails = 0, runs = 0;
        for (const Probe& p : probes_)
          if (p.index == hi_ && p.phase == "measure") fails += p.result == "fail", runs += p.result == "fail" || p.result == "pass";
        if (fails == 0) {
          fail(short_sha(spec_.bad) + " passed all " + std::to_string(runs) + " probes: it is not red");
          return cancel;
        }
        failure_rate_ = static_cast<double>(fails) / runs;
        repeats_ = repeats_for(wilson_lower(fails, runs));
        ask(-1, "verify-good", repeats_);
        return cancel;
      }
    } else {
      const int bad = verdict(hi_, "verify-bad");
      if (bad == 1) take(unneeded(hi_, "verify-bad"));
      if (bad == 0) {
        fail(short_sha(spec_.bad) + " passed " + std::to_string(repeats_) + " probe(s): it is not red");
        take(stop(BisectState::Failed, error_));
        return cancel;
      }
      if (bad < 0) {
        if (verdict(-1, "verify-good") == 1) {
          fail(short_sha(spec_.good) + " fails too: it is not green");
          take(stop(BisectState::Failed, error_));
        }
        return cancel;
      }
    }
    const int good = verdict(-1, "verify-good");
    if (good == 1) {
      fail(short_sha(spec_.good) + " fails too: it is not green");
      take(stop(BisectState::Failed, error_));
      return cancel;
    }
    if (good < 0) return cancel;
    stage_ = "search";
  } else if (stage_ == "search") {
    const int mid = (lo_ + hi_) / 2;
    const int v = verdict(mid, "search");
    if (v < 0) return cancel;
    take(unneeded(mid, "search"));
    (v == 1 ? hi_ : lo_) = mid;
  } else {
    return cancel;
  }
  if (hi_ - lo_ <= 1) {
    state_ = BisectState::Found;
    stage_ = "done";
    return cancel;
  }
  ask((lo_ + hi_) / 2, "search", repeats_);
  return cancel;
}

std::vector<std::string> Bisection::stop(BisectState state, const std::string& why) {
  std::vector<std::string> runs;
  for (Probe& p : probes_)
    if (p.result.empty()) {
      if (!p.run.empty()) runs.push_back(p.run);
      p.result = "unneeded";
    }
  state_ = state;
  stage_ = "done";
  if (error_.empty()) error_ = why;
  return runs;
}

void Bisection::restarted() {
  std::vector<std::pair<int, std::string>> again;
  for (Probe& p : probes_)
    if (!p.run.empty() && p.result.empty()) {
      p.result = "lost";
      p.detail = "the daemon restarted while it ran";
      again.push_back({p.index, p.phase});
    }
  if (done()) return;
  for (const auto& [index, phase] : again) ask(index, phase, 1);
}

std::optional<std::string> Bisection::culprit() const {
  if (state_ != BisectState::Found) return std::nullopt;
  return path_[static_cast<std::size_t>(hi_)];
}

int Bisection::runs_used() const {
  return static_cast<int>(std::count_if(probes_.begin(), probes_.end(), [](const Probe& p) {
    return !p.run.empty() && (p.result == "pass" || p.result == "fail" || p.result == "inconclusive" || p.result == "missing");
  }));
}

nlohmann::json Bisection::json() const {
  nlohmann::json probes = nlohmann::json::array();
  for (const Probe& p : probes_)
    probes.push_back({{"sha", p.sha}, {"index", p.index}, {"phase", p.phase}, {"run", p.run.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.run)},
                      {"result", p.result.empty() ? nlohmann::json(p.run.empty() ? "queued" : "running") : nlohmann::json(p.result)},
                      {"detail", p.detail}});
  const auto c = culprit();
  return {{"id", id_},
          {"state", to_string(state_)},
          {"stage", stage_},
          {"spec", spec_.json()},
          {"commits", path_},
          {"subjects", subjects_},
          {"repeats", repeats_},
          {"failure_rate", failure_rate_ < 0 ? nlohmann::json(nullptr) : nlohmann::json(failure_rate_)},
          {"last_good", lo_ < 0 ? spec_.good : path_[static_cast<std::size_t>(lo_)]},
          {"first_bad", path_.empty() ? nlohmann::json(nullptr) : nlohmann::json(path_[static_cast<std::size_t>(hi_)])},
          {"culprit", c ? nlohmann::json(*c) : nlohmann::json(nullptr)},
          {"error", error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_)},
          {"runs_used", runs_used()},
          {"probes", probes}};
}

Bisection Bisection::from_json(const nlohmann::json& j) {
  Bisection b(j.value("id", ""), BisectSpec::from_json(j.value("spec", nlohmann::json::object())),
              j.value("commits", std::vector<std::string>{}));
  if (j.contains("subjects") && j["subjects"].is_array())
    for (const auto& s : j["subjects"]) b.subjects_.push_back(s.is_string() ? s.get<std::string>() : "");
  b.probes_.clear();
  for (const auto& p : j.value("probes", nlohmann::json::array())) {
    Probe q;
    q.sha = p.value("sha", "");
    q.index = p.value("index", 0);
    q.phase = p.value("phase", "");
    q.run = p["run"].is_string() ? p["run"].get<std::string>() : "";
    const std::string r = p.value("result", "");
    q.result = r == "queued" || r == "running" ? "" : r;
    q.detail = p.value("detail", "");
    b.probes_.push_back(std::move(q));
  }
  const std::string state = j.value("state", "running");
  b.state_ = state == "found" ? BisectState::Found : state == "failed" ? BisectState::Failed : state == "cancelled" ? BisectState::Cancelled
                                                                                                                   : BisectState::Running;
  b.stage_ = j.value("stage", "verify");
  b.repeats_ = j.value("repeats", 1);
  b.failure_rate_ = j["failure_rate"].is_number() ? j["failure_rate"].get<double>() : -1;
  const auto index_of = [&](const nlohmann::json& sha, int fallback) {
    if (!sha.is_string()) return fallback;
    auto it = std::find(b.path_.begin(), b.path_.end(), sha.get<std::string>());
    return it == b.path_.end() ? fallback : static_cast<int>(it - b.path_.begin());
  };
  b.lo_ = index_of(j.value("last_good", nlohmann::json()), -1);
  b.hi_ = index_of(j.value("first_bad", nlohmann::json()), static_cast<int>(b.path_.size()) - 1);
  b.error_ = j["error"].is_string() ? j["error"].get<std::string>() : "";
  return b;
}

}  // namespace pto
