#include "hosting/attached_runs.h"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "util/api_paths.h"
#include "util/random_hex.h"

namespace pto {

std::optional<Answer> AttachedRuns::join(const RunSubmission& s) {
  auto it = by_key_.find(s.attach);
  if (it == by_key_.end()) {
    by_key_[s.attach] = {"", s.sha, true, {}};  // the caller makes it: later clients wait for it
    return std::nullopt;
  }
  Attached& a = it->second;
  if (a.sha != s.sha)
    return Answer::error(Outcome::Conflict, "workflow run " + s.attach + " is run " + (a.run.empty() ? "(being made)" : a.run) + " of commit " +
                                                (a.sha.empty() ? "(none)" : a.sha) + "; this submission is of " + (s.sha.empty() ? "(none)" : s.sha));
  if (a.creating)  // its first client's commit is being fetched: the client retries
    return Answer{Outcome::Unavailable, {{"error", "the run of workflow run " + s.attach + " is being made; retry"}, {"retry", true}}};
  HostedRun* run = find_(a.run);
  if (!run || run->engine().finished()) {
    it->second = {"", s.sha, true, {}};  // a finished run's key: the caller makes a new run
    return std::nullopt;
  }
  RunEngine& engine = run->engine();
  if (std::string unknown = engine.unknown_job(s.jobs); !unknown.empty())
    return Answer::error(Outcome::BadRequest, "no job '" + unknown + "' in the definitions of run " + a.run);
  const std::string client = random_hex(8);
  a.clients[client] = s.jobs;
  engine.want(s.jobs);
  spdlog::info("run {}: a client of workflow run {} attached for {}", a.run, s.attach, nlohmann::json(s.jobs).dump());
  return Answer{Outcome::Ok, {{"id", a.run}, {"url", api_path::run(a.run)}, {"state", "running"}, {"client", client}, {"attached", true}}};
}

void AttachedRuns::made(const RunSubmission& s, Answer& answer) {
  Attached& a = by_key_[s.attach];
  a.run = answer.body["id"];
  a.sha = s.sha;
  a.creating = false;
  const std::string client = random_hex(8);
  a.clients[client] = s.jobs;
  answer.body["client"] = client;
  answer.body["attached"] = false;
}

Answer AttachedRuns::detach(const std::string& run, const std::string& client, bool cancel) {
  auto it = std::find_if(by_key_.begin(), by_key_.end(), [&](const auto& kv) { return kv.second.run == run; });
  HostedRun* hosted = find_(run);
  if (it == by_key_.end() || !hosted || hosted->engine().finished())
    return Answer::error(Outcome::NotFound, "run " + run + " has no attached clients");
  Attached& a = it->second;
  auto c = a.clients.find(client);
  if (c == a.clients.end()) return Answer::error(Outcome::NotFound, "run " + run + " has no client " + client);
  const std::vector<std::string> jobs = c->second;
  a.clients.erase(c);
  RunEngine& engine = hosted->engine();
  if (cancel) {
    // Its own jobs: those no other client asked for or needs.
    std::vector<std::string> others;
    for (const auto& [id, js] : a.clients) others.insert(others.end(), js.begin(), js.end());
    const std::set<std::string> kept = engine.with_needs(others);
    std::set<std::string> own;
    for (const auto& n : engine.with_needs(jobs))
      if (!kept.count(n)) own.insert(n);
    if (!a.clients.empty()) engine.unwant(own, "its workflow job was cancelled");
  }
  const std::size_t left = a.clients.size();
  if (left == 0) {
    if (cancel) hosted->cancel(0, "every workflow job of " + it->first + " was cancelled");
    else engine.release_held("no workflow job of " + it->first + " asked for it");
  }
  return {Outcome::Ok, {{"id", run}, {"client", client}, {"clients_left", left}}};
}

void AttachedRuns::forget_run(const std::string& run) {
  for (auto a = by_key_.begin(); a != by_key_.end();) a = a->second.run == run ? by_key_.erase(a) : std::next(a);
}

}  // namespace pto
