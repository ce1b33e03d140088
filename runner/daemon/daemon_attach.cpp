// One pto-runner run per workflow run (`submit --attach [KEY]`, SPEC "The switch-over"): the first client of a
// key makes the run (planned with every job of its commit, all but its own held: engine/engine_attach.cpp);
// later clients of the same key and sha add their jobs to it, so the lead job and the build run once per
// workflow run; another sha under the key is 409. Each client leaves at its end, or interrupted (then the
// jobs only it asked for are cancelled); with no client left the held jobs are skipped, or, after an
// interrupt, the run is cancelled.
#include <algorithm>

#include "daemon/daemon.h"
#include <spdlog/spdlog.h>

#include "util/api_paths.h"
#include "util/random_hex.h"

namespace pto {

std::optional<Answer> Daemon::attach_to_existing(const RunSubmission& s) {
  auto it = attached_.find(s.attach);
  if (it == attached_.end()) return std::nullopt;
  AttachedRun& a = it->second;
  if (a.sha != s.sha)
    return Answer::error(Outcome::Conflict, "workflow run " + s.attach + " is run " + (a.run.empty() ? "(being made)" : a.run) + " of commit " +
                                                (a.sha.empty() ? "(none)" : a.sha) + "; this submission is of " + (s.sha.empty() ? "(none)" : s.sha));
  if (a.creating)  // its first client's commit is being fetched: the client retries
    return Answer{Outcome::Unavailable, {{"error", "the run of workflow run " + s.attach + " is being made; retry"}, {"retry", true}}};
  HostedRun* run = find_run(a.run);
  if (!run || run->engine().finished()) {
    attached_.erase(it);
    return std::nullopt;
  }
  RunEngine& engine = run->engine();
  if (std::string unknown = engine.unknown_job(s.jobs); !unknown.empty())
    return Answer::error(Outcome::BadRequest, "no job '" + unknown + "' in the definitions of run " + a.run);
  const std::string client = random_hex(8);
  a.clients[client] = s.jobs;
  engine.want(s.jobs);
  spdlog::info("run {}: a client of workflow run {} attached for {}", a.run, s.attach, nlohmann::json(s.jobs).dump());
  refresh_view();
  return Answer{Outcome::Ok, {{"id", a.run}, {"url", api_path::run(a.run)}, {"state", "running"}, {"client", client}, {"attached", true}}};
}

void Daemon::attached_run_made(const RunSubmission& s, Answer& answer) {
  AttachedRun& a = attached_[s.attach];
  a.run = answer.body["id"];
  a.sha = s.sha;
  a.creating = false;
  const std::string client = random_hex(8);
  a.clients[client] = s.jobs;
  answer.body["client"] = client;
  answer.body["attached"] = false;
}

Answer Daemon::detach_client(const std::string& run, const std::string& client, bool cancel, const Caller&) {
  auto it = std::find_if(attached_.begin(), attached_.end(), [&](const auto& kv) { return kv.second.run == run; });
  HostedRun* hosted = find_run(run);
  if (it == attached_.end() || !hosted || hosted->engine().finished())
    return Answer::error(Outcome::NotFound, "run " + run + " has no attached clients");
  AttachedRun& a = it->second;
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
  refresh_view();
  return {Outcome::Ok, {{"id", run}, {"client", client}, {"clients_left", left}}};
}

}  // namespace pto
