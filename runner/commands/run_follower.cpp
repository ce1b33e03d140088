#include "commands/run_follower.h"

#include "client/api_client.h"
#include "plan/plan.h"
#include "report/run_view.h"
#include "util/api_paths.h"
#include "util/clock.h"

namespace pto {

namespace {

/// The string at `key` of `j`, or "": a reference, as each poll reads every step of the run (thousands).
const std::string& text_at(const nlohmann::json& j, const char* key) {
  static const std::string none;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get_ref<const std::string&>() : none;
}

std::string cards_of(const nlohmann::json& step) {
  std::string cards;
  for (const auto& c : step["cards"]) cards += (cards.empty() ? "" : ",") + std::to_string(c.get<int>());
  return cards;
}

/// "... waiting: JOB / STEP is 12th of 230 in the queue, expected start in ~8m00s (3 steps of this run wait)":
/// for the run's first waiting step, when it changes and at most every 30 s. Also notes each waiting step's
/// expected wait the first time it is seen queued.
std::string queue_line(const nlohmann::json& run, const std::set<RunFollower::StepPlace>* queued, std::map<std::string, double>& expected_wait,
                       std::string& last_line, std::chrono::steady_clock::time_point& last_at, std::chrono::steady_clock::time_point now) {
  const nlohmann::json* first = nullptr;
  const nlohmann::json* first_job = nullptr;
  int waiting = 0;
  const nlohmann::json& jobs = run["jobs"];
  auto visit = [&](const RunFollower::StepPlace& place) {
    if (place.first >= jobs.size() || place.second >= jobs[place.first]["steps"].size()) return;
    const nlohmann::json& job = jobs[place.first];
    const nlohmann::json& s = job["steps"][place.second];
    if (text_at(s, "state") != "waiting") return;
    auto queue = s.find("queue");
    if (queue == s.end() || !queue->is_object()) return;
    const nlohmann::json& q = *queue;
    ++waiting;
    if (q["eta_seconds"].is_number() && !expected_wait.count(text_at(s, "id")))
      expected_wait[text_at(s, "id")] = q["eta_seconds"].get<double>() + q.value("wait_seconds", 0.0);
    if (!first || q.value("position", 0) < (*first)["queue"].value("position", 0)) first = &s, first_job = &job;
  };
  if (queued)
    for (const auto& place : *queued) visit(place);
  else  // every step
    for (std::size_t k = 0; k < jobs.size(); ++k)
      for (std::size_t i = 0; i < jobs[k]["steps"].size(); ++i) visit({k, i});
  if (!first) return "";
  const nlohmann::json& q = (*first)["queue"];
  // At most every 30 s; the first expected start at once. (A line that said "no expected start" has not given one.)
  const bool first_eta = q["eta_seconds"].is_number() && last_line.find("expected start in ~") == std::string::npos;
  if (now - last_at < std::chrono::seconds(30) && !first_eta) return "";
  std::string line = "... waiting: " + title_of(*first_job, *first) + " is #" + std::to_string(q.value("position", 0)) + " of " +
                     std::to_string(run.value("queue_total", 0)) + " in the queue";
  line += q["eta_seconds"].is_number() ? ", expected start in ~" + format_duration(q["eta_seconds"].get<double>())
                                       : ", no expected start (" + q.value("reason", "") + ")";
  if (waiting > 1) line += " (" + std::to_string(waiting) + " steps of this run wait)";
  if (line == last_line) return "";
  last_line = line;
  last_at = now;
  return line + "\n";
}

}  // namespace

std::string title_of(const nlohmann::json& job, const nlohmann::json& step) {
  return step_label(job.value("id", ""), step.value("name", ""));
}

RunFollower::RunFollower(std::string server, std::string token, std::string run, Options options)
    : server_(std::move(server)), token_(std::move(token)), run_(std::move(run)), options_(std::move(options)) {}

bool RunFollower::keep_own_jobs(nlohmann::json& run) {
  // Its jobs and what they need; the others' jobs are other clients' to show.
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& j : run["jobs"])
      if (options_.jobs.count(j.value("name", "")))
        for (const auto& n : j.value("needs", nlohmann::json::array())) grew |= options_.jobs.insert(n.get<std::string>()).second;
  }
  nlohmann::json kept = nlohmann::json::array();
  bool done = true;
  for (const auto& j : run["jobs"])
    if (options_.jobs.count(j.value("name", ""))) {
      kept.push_back(j);
      const std::string st = j.value("state", "");
      done = done && st != "pending" && st != "running";
    }
  run["jobs"] = std::move(kept);
  return done;
}

std::string RunFollower::poll(nlohmann::json& run, bool& done, const std::set<StepPlace>* changed, const std::set<StepPlace>* queued) {
  const bool own_done = options_.attached && run.contains("jobs") && keep_own_jobs(run);
  if (options_.attached) changed = queued = nullptr;  // its jobs were cut out: the places are not the delta's
  // One block per poll: state changes, live lines, heartbeats.
  std::string text;
  const auto now = steady_now();
  const nlohmann::json& jobs = run["jobs"];
  if (!changed) {
    for (std::size_t k = 0; k < jobs.size(); ++k)
      for (std::size_t i = 0; i < jobs[k]["steps"].size(); ++i) read_step(jobs[k], jobs[k]["steps"][i], {k, i}, now, text);
  } else {
    std::set<StepPlace> places = *changed;  // in the run's order, as a whole read prints them
    places.insert(running_.begin(), running_.end());
    for (const auto& [k, i] : places)
      if (k < jobs.size() && i < jobs[k]["steps"].size()) read_step(jobs[k], jobs[k]["steps"][i], {k, i}, now, text);
  }
  text += queue_line(run, queued, expected_wait_, last_queue_line_, last_queue_at_, now);
  const std::string st = run.value("state", "");
  done = (st != "running" && st != "cancelling") || own_done;
  return text;
}

void RunFollower::read_step(const nlohmann::json& job, const nlohmann::json& s, const StepPlace& place, std::chrono::steady_clock::time_point now,
                            std::string& text) {
  const std::string &id = text_at(s, "id"), &state = text_at(s, "state");
  if (state == "running") running_.insert(place);
  else running_.erase(place);
  Seen& seen = seen_[id];
  const bool changed = seen.state != state;
  if (changed) seen.state = state;
  // A step that started and ended between two polls still has its output shown.
  const bool ran = s.contains("started") && s["started"].is_string();
  if (options_.follow && (state == "running" || (changed && ran))) poll_logs(job, s, state != "running", text);
  // A verdict that grew after the step ended (its control run on main came in) is said again.
  const std::string& verdict = text_at(s, "verdict");
  const bool new_verdict = !changed && !verdict.empty() && seen.verdict != verdict && state != "running";
  if (seen.verdict != verdict) seen.verdict = verdict;
  if (new_verdict) text += "    " + title_of(job, s) + ": " + verdict + "\n";
  if (!changed) {
    if (state == "running" && !options_.follow && now - last_beat_[id] >= std::chrono::duration<double>(options_.heartbeat_seconds)) {
      last_beat_[id] = now;
      const double secs = std::chrono::duration<double>(now - running_since_[id]).count();
      text += "... " + title_of(job, s) + ": still running after " + format_duration(secs) +
              (cards_of(s).empty() ? "" : " [cards " + cards_of(s) + "]") + "\n";
    }
    return;
  }
  if (state == "running") {
    running_since_[id] = last_beat_[id] = now;
    text += "==> " + title_of(job, s) + (cards_of(s).empty() ? "" : "  [cards " + cards_of(s) + "]") + "\n";
  } else if (state != "pending" && state != "waiting") {
    const std::string end = describe_step_end(s);
    text += "<== " + title_of(job, s) + ": " + state + (end.empty() ? "" : ", " + end) + "\n";
    if (s.contains("verdict") && s["verdict"].is_string())  // what its failures were charged to
      text += "    " + s["verdict"].get<std::string>() + "\n";
    text += failed_tests_text(s, server_);
  }
}

void RunFollower::poll_logs(const nlohmann::json& job, const nlohmann::json& step, bool finished, std::string& out) {
  // Complete lines only, each prefixed [job / step]; a partial line waits for its end (or the step's).
  const std::string id = step.value("id", "");
  Tail& t = tails_[id];
  for (int pages = 0; pages < 16; ++pages) {  // at most 16 MiB per step and poll
    ApiResponse r =
        api_request("GET", server_ + api_path::step_log(run_, id) + "?offset=" + std::to_string(t.offset) + "&bytes=1048576", token_);
    if (!r.reached || r.status != 200) return;
    std::string end = r.header("x-log-end");
    if (end.empty() || r.body.empty()) break;
    t.offset = std::stoull(end);
    t.partial += r.body;
    if (r.body.size() < 1048576) break;
  }
  const std::string prefix = "[" + title_of(job, step) + "] ";
  std::size_t from = 0;
  for (std::size_t nl; (nl = t.partial.find('\n', from)) != std::string::npos; from = nl + 1)
    out += prefix + t.partial.substr(from, nl + 1 - from);
  t.partial.erase(0, from);
  if (finished && !t.partial.empty()) {
    out += prefix + t.partial + "\n";
    t.partial.clear();
  }
}

}  // namespace pto
