// HostedRun, one run as a host holds it (hosting/hosted_run), with the engine's seams faked (engine_fakes.h),
// a fake lender of sandbox users and the real Access and LeaseBook the daemon and `run` give it: its tokens,
// its leases bounded by its steps, a run that waits for a user, its tree handed over before it starts and
// taken back before its user goes, and the host hearing of its end once.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include "config/project.h"
#include "engine_fakes.h"
#include "exec/card_access.h"
#include "hosting/hosted_run.h"
#include "lease/lease_book.h"
#include "sandbox/user_lender.h"
#include "server/access.h"
#include "test_support.h"
#include "util/manual_clock.h"

using namespace pto;
using namespace pto::test;

namespace {

/// Lends its users in order; records what came back and whether the run's tree was root's again by then.
struct FakeLender : UserLender {
  std::vector<RunAs> users;
  std::map<std::string, std::size_t> lent;
  std::vector<std::string> given_back;
  std::function<void(const std::string&)> on_give_back;
  std::function<void()> on_sweep;  // null: nothing to sweep
  std::string why_not = "no users in this test";
  bool active() const override { return !users.empty(); }
  const std::string& why() const override { return why_not; }
  std::optional<RunAs> lend(const std::string& run) override {
    if (auto it = lent.find(run); it != lent.end()) return users[it->second];
    for (std::size_t i = 0; i < users.size(); ++i) {
      bool taken = false;
      for (const auto& [r, j] : lent) taken |= j == i;
      if (!taken) {
        lent[run] = i;
        return users[i];
      }
    }
    return std::nullopt;
  }
  std::function<std::string()> leftovers_sweep(const std::string&) override {
    if (!on_sweep) return nullptr;
    return [this] {
      on_sweep();
      return std::string();
    };
  }
  std::string give_back(const std::string& run) override {
    if (on_give_back) on_give_back(run);
    given_back.push_back(run);
    lent.erase(run);
    return "";
  }
};

/// One host: its seams, lender, settings, tokens and lease book, and the runs made on it.
struct Host {
  TempDir dir;
  boost::asio::io_context io;
  ManualClock clock;
  FakeBroker broker;
  FakeExecutor executor;
  FakeLender lender;
  RunnerConfig cfg;
  Access access{true};
  LeaseBook book{io, broker, 5, 1};
  LeaseSite site{access, book, "http://127.0.0.1:9/"};
  int finished = 0;

  std::unique_ptr<HostedRun> make(const std::string& job) {
    write_project(dir, {{"j.yml", job}});
    LoadOptions lo;
    lo.root = dir.str();
    Diagnostics d;
    Project project = load_project(lo, d);
    Plan plan = build_plan(project, PlanOptions{}, d);
    REQUIRE_FALSE(d.has_input_errors());
    EngineOptions eo = make_engine_options(project.root, (dir.path() / "state").string(), cfg, false, 1, InheritedEnv::AllButOurs);
    RunHosting hosting{io, clock, broker, executor, lender, cfg, &site, nullptr};
    auto run = std::make_unique<HostedRun>(hosting, std::move(plan), std::move(eo), nlohmann::json{{"jobs", {"j"}}}, nullptr, nullptr);
    run->set_on_finished([this](HostedRun&) { ++finished; });
    return run;
  }
  void settle() {
    io.restart();
    io.poll();
  }
  Caller caller(const std::string& token) const {
    HttpRequest req;
    req.authorization = "Bearer " + token;
    return access.identify(req);
  }
};

const char* kOneCardStep = "name: j\nsteps:\n  - {name: s, devices: 1, timeout-minutes: 10, run: 'true'}\n";

}  // namespace

TEST_CASE("hosted run: its steps reach the host's lease endpoint, each attempt with a token of its own that ends with it, "
          "and a given-back run leaves no token or lease behind",
          "[hosting]") {
  Host h;
  auto run = h.make(kOneCardStep);
  REQUIRE(run->begin());
  CHECK(run->begun());
  h.settle();
  h.broker.grant_first({0});
  h.settle();
  REQUIRE(h.executor.launched.size() == 1);
  CHECK(h.executor.env(0, "PTO_RUNNER_SERVER") == h.site.url);
  const std::string step_token = h.executor.env(0, "PTO_RUNNER_LEASE_TOKEN");
  REQUIRE_FALSE(step_token.empty());
  const Caller by = h.caller(step_token);
  CHECK(by.role == Caller::Role::Run);
  CHECK(by.run == run->id());
  REQUIRE(by.step);
  CHECK(*by.step == StepId{0, 0});

  // A lease its step asks for is that step's, and lasts at most what the step's 10 minutes leave.
  h.clock.advance(60);
  LeaseRequest asked;
  asked.devices = 1;
  REQUIRE_FALSE(run->admit_lease(asked, by));
  REQUIRE(asked.step);
  CHECK(*asked.step == StepId{0, 0});
  CHECK(asked.max_seconds > 0);
  CHECK(asked.max_seconds <= 540 + 1);
  asked.run_id = run->id();
  bool refused = false;
  const std::string lease = h.book.create(asked, [](const Lease&) {}, [&](int, const std::string&) { refused = true; });
  REQUIRE(h.book.find(lease));

  // The attempt ends: its token is no more, and the lease it asked for (still waiting for a card) is revoked.
  h.executor.finish(1, 0);
  h.settle();
  CHECK(h.caller(step_token).role == Caller::Role::Anonymous);
  CHECK(refused);
  CHECK(h.book.active().empty());
  REQUIRE(run->engine().finished());
  CHECK(h.finished == 1);

  // The run's own token (the one its steps would use without theirs) goes with its return, not before.
  const std::string run_token = "a-run-token";
  h.access.add_run_token(run_token, run->id());
  bool returned = false;
  run->give_back([&] { returned = true; });
  CHECK(returned);
  CHECK(h.caller(run_token).role == Caller::Role::Anonymous);
  CHECK(h.finished == 1);  // heard once
}

TEST_CASE("hosted run: max-cards-per-run refuses a lease past the run's share, and a retry's leases keep off the cards its "
          "failure was charged to",
          "[hosting]") {
  Host h;
  h.cfg.max_cards_per_run = 1;
  h.cfg.health.fault_patterns.push_back({"device fault on card", std::make_shared<const std::regex>("device fault on card"), FailureCause::Card, 0});
  auto run = h.make("name: j\nsteps:\n  - {name: s, devices: 1, retry: {max: 1}, run: 'true'}\n");
  REQUIRE(run->begin());
  h.settle();
  h.broker.grant_first({3});
  h.settle();
  REQUIRE(h.executor.launched.size() == 1);
  // The attempt fails with a card fault in its log: card 3 is charged and the step is retried elsewhere.
  {
    std::ofstream(h.executor.launched[0].log_path) << "device fault on card\n";
  }
  h.executor.finish(1, 1);
  h.settle();
  REQUIRE(h.broker.waiting.size() == 1);
  CHECK(h.broker.waiting.begin()->second.req.avoid == std::vector<int>{3});
  h.broker.grant_first({4});
  h.settle();
  REQUIRE(h.executor.launched.size() == 2);
  const Caller by = h.caller(h.executor.env(1, "PTO_RUNNER_LEASE_TOKEN"));
  REQUIRE(by.step);

  LeaseRequest two;
  two.devices = 2;
  auto refusal = run->admit_lease(two, by);
  REQUIRE(refusal);
  CHECK(refusal->outcome == Outcome::Conflict);
  CHECK(refusal->body["error"].get<std::string>().find("max-cards-per-run is 1") != std::string::npos);

  LeaseRequest one;
  one.devices = 1;
  CHECK_FALSE(run->admit_lease(one, by));
  CHECK(one.avoid == std::vector<int>{3});
  h.executor.finish(2, 0);
  h.settle();
  CHECK(run->engine().finished());
}

TEST_CASE("hosted run: with every sandbox user lent a run waits and nothing of it starts, and cancelled meanwhile it ends at once",
          "[hosting]") {
  Host h;
  h.lender.users = {{"pto-step0", 61000, 61000, {}}};
  auto first = h.make(kOneCardStep);
  auto second = h.make(kOneCardStep);
  REQUIRE(first->begin());
  CHECK_FALSE(second->begin());
  CHECK_FALSE(second->begun());
  h.settle();
  CHECK(h.broker.waiting.size() == 1);  // the first run's step only
  REQUIRE(second->user() == nullptr);
  second->cancel(0);
  h.settle();
  CHECK(second->engine().finished());
  CHECK(second->engine().result() == ExitCode::Failure);  // an API cancel: the run is red, not interrupted
  CHECK(h.executor.launched.empty());
  CHECK(h.lender.lent.count(second->id()) == 0);
}

TEST_CASE("hosted run: its sandbox user gets its tree before its steps run as it, its leased cards' files while it holds them, "
          "and goes back only once what it left is swept and the tree is root's again",
          "[hosting]") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: handing a run's tree to another user needs root");
    return;
  }
  Host h;
  const uid_t uid = 61000;
  h.lender.users = {{"pto-step0", uid, uid, {}}};
  const fs::path card = h.dir.path() / "davinci0";
  std::ofstream(card) << "";
  ::chmod(card.c_str(), 0600);
  h.cfg.card_files = {(h.dir.path() / "davinci{id}").string()};
  auto run = h.make(kOneCardStep);
  const fs::path files = fs::path(run->run_dir()) / "files";
  bool tree_was_root_s = false, swept_first = false;
  // The sweep (what still runs as the user killed) comes first: nothing of it writes to the tree once it is root's.
  h.lender.on_sweep = [&] {
    struct stat st {};
    swept_first = h.lender.given_back.empty() && ::stat(files.c_str(), &st) == 0 && st.st_uid == uid;
  };
  h.lender.on_give_back = [&](const std::string&) {
    struct stat st {};
    // files/ (the $GITHUB_* files, which may hold secrets) is gone, and the run dir is root's.
    tree_was_root_s = ::stat(files.c_str(), &st) != 0 && ::stat(run->run_dir().c_str(), &st) == 0 && st.st_uid == 0;
  };
  REQUIRE(run->begin());
  REQUIRE(run->user());
  CHECK(run->user()->uid == uid);
  struct stat st {};
  REQUIRE(::stat(files.c_str(), &st) == 0);
  CHECK(st.st_uid == uid);  // handed over before the engine started
  h.settle();
  h.broker.grant_first({0});
  h.settle();
  REQUIRE(h.executor.launched.size() == 1);
  REQUIRE(h.executor.launched[0].run_as);
  CHECK(h.executor.launched[0].run_as->uid == uid);

  Lease l;
  l.id = "lease-000000000001";
  l.cards = {0};
  run->lease_card_access(l, true);
  CHECK(has_file_access(card.string(), uid));
  run->lease_card_access(l, false);
  CHECK_FALSE(has_file_access(card.string(), uid));

  h.executor.finish(1, 0);
  h.settle();
  REQUIRE(run->engine().finished());
  bool returned = false;
  run->give_back([&] { returned = true; });
  CHECK(returned);
  CHECK(h.lender.given_back == std::vector<std::string>{run->id()});
  CHECK(swept_first);
  CHECK(tree_was_root_s);
}
