#pragma once
// One pto-runner run per workflow run (`submit --attach [KEY]`, SPEC "The switch-over"): the first client of a
// key makes the run (planned with every job of its commit, all but its own held: engine/engine_attach.cpp);
// later clients of the same key and sha add their jobs to it, so the lead job and the build run once per
// workflow run; another sha under the key is 409. Each client leaves at its end, or interrupted (then the
// jobs only it asked for are cancelled); with no client left the held jobs are skipped, or, after an
// interrupt, the run is cancelled. Its owner (a daemon) finds runs for it and makes the first client's run.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hosting/hosted_run.h"
#include "server/requests.h"
#include "util/answer.h"

namespace pto {

class AttachedRuns {
 public:
  /// The hosted run of an id, or null when it is no longer hosted.
  using FindRun = std::function<HostedRun*(const std::string& id)>;
  explicit AttachedRuns(FindRun find) : find_(std::move(find)) {}

  /// A submission with `attach`: joins the key's run (200, the client's id), refuses (409 another sha, 503
  /// while the first client's run is being made, 400 an unknown job), or nullopt: the caller makes the run,
  /// and says how that went with made() or not_made().
  std::optional<Answer> join(const RunSubmission& s);
  /// The first client's run was made: it is the key's run now, and `answer` gets the client's id.
  void made(const RunSubmission& s, Answer& answer);
  /// The first client's run could not be made: the next client of the key makes it.
  void not_made(const std::string& key) { by_key_.erase(key); }
  /// A client leaves (`cancel`: interrupted): 200 with the clients left, 404 for an unknown run or client.
  Answer detach(const std::string& run, const std::string& client, bool cancel);
  /// The run ended: its key is free again.
  void forget_run(const std::string& run);

 private:
  struct Attached {
    std::string run, sha;
    bool creating = true;  // the first client's run is being made (its commit fetched): later ones retry
    std::map<std::string, std::vector<std::string>> clients;  // client -> the jobs it asked for
  };
  FindRun find_;
  std::map<std::string, Attached> by_key_;
};

}  // namespace pto
