// AttachedRuns (hosting/attached_runs): the first client of a workflow run's key makes the run, later ones wait
// while it is made, another commit under the key is refused, a run not made frees its key. (Clients joining a
// running run and leaving it: attach_test.cpp, with a real daemon.)
#include <catch2/catch.hpp>

#include "hosting/attached_runs.h"

using namespace pto;

namespace {
RunSubmission of(const std::string& key, const std::string& sha, std::vector<std::string> jobs) {
  RunSubmission s;
  s.attach = key;
  s.sha = sha;
  s.jobs = std::move(jobs);
  return s;
}
}  // namespace

TEST_CASE("attached runs: the first client makes the run, the next waits while it is made, another sha is refused, a run not made frees the key", "[hosting]") {
  std::vector<std::string> asked;
  AttachedRuns runs([&](const std::string& id) -> HostedRun* {
    asked.push_back(id);
    return nullptr;  // no run hosted: a made run that is gone frees its key
  });
  const std::string sha(40, 'a');
  CHECK_FALSE(runs.join(of("gh-1", sha, {"build"})));  // first: the caller makes it
  const auto waiting = runs.join(of("gh-1", sha, {"unit-tests"}));
  REQUIRE(waiting);
  CHECK(waiting->outcome == Outcome::Unavailable);
  CHECK(waiting->body["retry"] == true);
  const auto other = runs.join(of("gh-1", std::string(40, 'b'), {"x"}));
  REQUIRE(other);
  CHECK(other->outcome == Outcome::Conflict);
  CHECK(other->body["error"].get<std::string>().find("is run (being made) of commit " + sha) != std::string::npos);

  runs.not_made("gh-1");
  CHECK_FALSE(runs.join(of("gh-1", sha, {"unit-tests"})));  // the next client makes it
  Answer made{Outcome::Created, {{"id", "run-1"}}};
  runs.made(of("gh-1", sha, {"unit-tests"}), made);
  CHECK(made.body["client"].get<std::string>().size() == 16);
  CHECK(made.body["attached"] == false);
  // Its run is no longer hosted (null here): the key is free, the caller makes a new run.
  CHECK_FALSE(runs.join(of("gh-1", sha, {"build"})));
  CHECK(asked == std::vector<std::string>{"run-1"});
  CHECK(runs.detach("run-9", "c", false).outcome == Outcome::NotFound);
  runs.forget_run("run-1");
}
