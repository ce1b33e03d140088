// RunHost (hosting/run_host), the daemon's runs without its API: a real host on simulated cards, a real run
// history in a temporary state dir, its real lease book; submissions answered, runs listed while hosted and
// gone once given back, a newer run of a pull request superseding the older, cancel's answers, and no run
// while the host stops.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <chrono>

#include "host/host.h"
#include "hosting/host_leases.h"
#include "hosting/run_host.h"
#include "hosting/shutdown.h"
#include "util/worker_pools.h"
#include "read_model/read_model.h"
#include "sandbox/sandbox_pool.h"
#include "store/run_history.h"
#include "store/run_reporter.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

namespace {

const char* kTwoSteps = "name: j\nsteps:\n  - {name: a, devices: 1, run: 'true'}\n  - {name: b, devices: 1, run: 'true'}\n";

/// A daemon's runs and what they need, wired as the daemon wires them (daemon/daemon.cpp), no API.
struct Hosting {
  TempDir dir;
  boost::asio::io_context io;
  RunnerConfig cfg;
  std::unique_ptr<pto::Host> host;
  ReadModel model;
  WorkerPools pools;
  bool quiet = false;
  Shutdown stop{io, [this] { return quiet; }, [] {}};
  std::unique_ptr<RunHistory> history;
  std::unique_ptr<RunReporter> reporter;
  std::unique_ptr<RunHost> runs;
  std::vector<std::string> finished, cancelled;
  std::map<std::string, std::string> superseded_by;  // of the runs that ended
  int after_run = 0;

  explicit Hosting(const std::string& job) {
    write_project(dir, {{"j.yml", job}});
    cfg.device_ids = {0, 1};
    cfg.lock_dir = (dir.path() / "locks").string();
    cfg.state_dir = (dir.path() / "state").string();
    cfg.sandbox.enabled = false;
    cfg.supersede = Supersede::PullRequest;
    fs::create_directories(cfg.state_dir);
    model.state_dir = cfg.state_dir;
    HostOptions ho;
    ho.simulate = true;
    std::string error;
    host = wire_host(io, cfg, ho, error);
    REQUIRE(host);
    history = std::make_unique<RunHistory>(cfg.state_dir, model, pools.git, nullptr, [](const std::string&, const std::string&) {});
    REQUIRE(history->open(false).empty());
    auto find = [this](const std::string& id) { return runs ? runs->find(id) : nullptr; };
    reporter = std::make_unique<RunReporter>(
        *history, model.metrics, cfg.main_ref, false,
        [find](const std::string& id) -> const nlohmann::json* {
          HostedRun* r = find(id);
          return r ? &r->request() : nullptr;
        },
        [] {});
    RunHost::Events on;
    on.muted = [](const std::string&) { return std::optional<TestMute>(); };
    on.finished = [this](HostedRun& r) {
    finished.push_back(r.id());
    superseded_by[r.id()] = r.engine().record().superseded_by;
  };
    on.cancelled = [this](const std::string& id) { cancelled.push_back(id); };
    on.refresh = [] {};
    on.changed = [] {};
    on.after_run = [this] { ++after_run; };
    LoadOptions lo;
    lo.root = dir.str();
    runs = std::make_unique<RunHost>(RunHostParts{io, *host, cfg, *history, *reporter, pools, nullptr, stop, model},
                                     RunDefaults{lo, true, 0.0005},
                                     std::make_unique<SandboxPool>(cfg.sandbox, cfg.shared_files, cfg.all_card_files(), cfg.lock_dir),
                                     std::move(on));
  }
  ~Hosting() { pools.join(); }

  /// Without `source:` a submission is answered before submit() returns.
  Answer submit(RunSubmission s) {
    std::optional<Answer> got;
    runs->submit(std::move(s), "test", [&](Answer a) { got = std::move(a); });
    REQUIRE(got);
    return *got;
  }
  bool settle(const std::function<bool()>& done, double seconds = 20) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done() && std::chrono::steady_clock::now() < until) io.run_for(std::chrono::milliseconds(10));
    return done();
  }
};

RunSubmission of_pull_request(int n) {
  RunSubmission s;
  s.ref = "refs/pull/" + std::to_string(n) + "/merge";
  s.github = {{"repository", "hw-native-sys/pypto"}};
  return s;
}

}  // namespace

TEST_CASE("run host: a submission is hosted, listed while it runs, heard of once at its end, and gone once given back",
          "[hosting]") {
  Hosting h(kTwoSteps);
  Answer a = h.submit(RunSubmission{});
  REQUIRE(a.outcome == Outcome::Created);
  const std::string id = a.body["id"];
  CHECK(h.runs->find(id) != nullptr);
  CHECK(h.runs->holds(id));
  CHECK(h.model.active.count(id) == 1);
  REQUIRE(h.settle([&] { return h.runs->empty(); }));
  CHECK(h.finished == std::vector<std::string>{id});
  CHECK(h.after_run == 1);
  CHECK(h.model.active.count(id) == 0);
  CHECK_FALSE(h.runs->holds(id));
  // Its end is journaled and listed among the recent runs: a cancel now is too late, not unknown.
  CHECK(h.runs->cancel(id, "test").outcome == Outcome::Conflict);
  CHECK(h.runs->cancel("no-such-run", "test").outcome == Outcome::NotFound);
}

TEST_CASE("run host: a newer run of the same pull request supersedes the older one, never a run of another",
          "[hosting]") {
  Hosting h("name: j\nsteps:\n  - {name: a, devices: 1, run: 'sleep 600', expected-minutes: 600}\n");
  const std::string first = h.submit(of_pull_request(7)).body["id"];
  const std::string other = h.submit(of_pull_request(8)).body["id"];
  const std::string second = h.submit(of_pull_request(7)).body["id"];
  REQUIRE(h.settle([&] { return !h.finished.empty(); }));
  CHECK(h.finished == std::vector<std::string>{first});
  CHECK(h.superseded_by[first] == second);
  CHECK_FALSE(h.runs->find(other)->engine().record().cancelled);
  CHECK_FALSE(h.runs->find(second)->engine().record().cancelled);
  CHECK(h.runs->find(second)->request()["pull_request"] == "hw-native-sys/pypto#7");
  // Cancelled on request: accepted once, its control runs told; the rest go when the host stops.
  CHECK(h.runs->cancel(second, "test").outcome == Outcome::Accepted);
  CHECK(h.cancelled == std::vector<std::string>{second});
  h.runs->cancel_all(143, nullptr);
  REQUIRE(h.settle([&] { return h.runs->empty(); }));
  CHECK(h.finished.size() == 3);
}

TEST_CASE("run host: while the host stops no run is made, and the answer says why", "[hosting]") {
  Hosting h(kTwoSteps);
  h.quiet = true;
  h.stop.begin_drain([](int) {}, 60, [] {});
  Answer a = h.submit(RunSubmission{});
  CHECK(a.outcome == Outcome::Unavailable);
  CHECK(h.runs->empty());
  CHECK(h.model.active.empty());
}
