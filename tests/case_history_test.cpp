// Every test case known, across runs (issue 32): muted tests (runner.yml's `tests.mute` and the admin's
// POST /api/v1/tests/mute, kept across restarts), the test history in the journal (flip rate per test and
// ref, flaky, most failing, slowest; card failures and a host's bad day left out; retention), GET
// /api/v1/tests?ref= and /api/v1/tests/{id}, the metrics, and the /tests page and the run page's failed
// tests in headless Chromium. Real pytest (Debian's python3-pytest) runs the suites.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "config/runner_config.h"
#include "lint/lint.h"
#include "read_model/card_history.h"
#include "served_daemon.h"
#include "store/journal.h"
#include "store/case_history.h"
#include "store/case_history_queries.h"
#include "test_support.h"
#include "testcases/mutes.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;
using pto::FailureCause;
using pto::TestCase;
using pto::TestResult;

namespace {

TestCase tc(const std::string& id, TestResult r, double duration = 1, int attempt = 1, std::optional<FailureCause> cause = std::nullopt) {
  TestCase c;
  c.id = id;
  c.result = r;
  c.duration = duration;
  c.attempt = attempt;
  c.cause = cause ? cause : (pto::is_failure(r) ? std::optional<FailureCause>(r == TestResult::Victim ? FailureCause::Card : FailureCause::Code)
                                                : std::nullopt);
  if (r == TestResult::Failed) c.message = "AssertionError: wrong\nmore";
  return c;
}

const json* find_id(const json& list, const std::string& id) {
  for (const auto& t : list)
    if (t["id"] == id) return &t;
  return nullptr;
}

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') out += static_cast<char>(c);
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

const json& step_of(const json& run) { return run["jobs"][0]["steps"][0]; }

}  // namespace

TEST_CASE("test mutes: a glob matches ids with their brackets as written, a mute ends after its day, at most max-muted", "[tests]") {
  using pto::test_glob_match;
  CHECK(test_glob_match("tests/st/*::test_x[*]", "tests/st/a/b.py::test_x[1-2]"));
  CHECK(test_glob_match("t[1]", "t[1]"));
  CHECK_FALSE(test_glob_match("t[1]", "t1"));  // a bracket is itself, not a character class
  CHECK(test_glob_match("a?c", "abc"));
  CHECK_FALSE(test_glob_match("a?c", "ac"));
  CHECK(test_glob_match("*", ""));
  CHECK(test_glob_match("*b*b*", "abcbd"));
  CHECK_FALSE(test_glob_match("*b*b*x", "abcbd"));
  CHECK_FALSE(test_glob_match("tests/st/test_a.py::test_1", "tests/st/test_a.py::test_10"));

  pto::TestMute yesterday{"old/*", "gone", "2026-12-01", "runner.yml"}, today{"new/*", "issue #1", "2026-12-02", "runner.yml"};
  pto::TestMutes mutes({yesterday, today}, {}, 2);
  CHECK_FALSE(mutes.match("old/test.py::t", "2026-12-02"));
  REQUIRE(mutes.match("new/test.py::t", "2026-12-02"));
  CHECK(mutes.match("new/test.py::t", "2026-12-02")->reason == "issue #1");
  CHECK_FALSE(mutes.match("new/test.py::t", "2026-12-03"));
  CHECK(mutes.in_force("2026-12-02") == 1);
  // The limit counts mutes in force: one more fits, then none.
  CHECK(mutes.add({"api/a", "r", "2026-12-31", "admin"}, "2026-12-02").empty());
  const std::string refused = mutes.add({"api/b", "r", "2026-12-31", "admin"}, "2026-12-02");
  CHECK(refused.find("max-muted (2)") != std::string::npos);
  CHECK(mutes.add({"new/*", "again", "2026-12-31", "admin"}, "2026-12-02").find("runner.yml already mutes") != std::string::npos);
  CHECK(mutes.add({"api/a", "longer", "2027-01-31", "admin"}, "2026-12-02").empty());  // replacing one is not one more
  CHECK(mutes.api().size() == 1);
  CHECK(mutes.api()[0].until == "2027-01-31");
  CHECK(mutes.remove("api/a"));
  CHECK_FALSE(mutes.remove("api/a"));

  // A judged attempt: failures it names become muted (their cause kept), passes and victims stay.
  std::vector<TestCase> cases = {tc("new/x", TestResult::Failed), tc("new/y", TestResult::Passed), tc("new/z", TestResult::Victim),
                                 tc("other", TestResult::Failed)};
  pto::MutedCount n = pto::mute_failures(cases, [&](const std::string& id) { return mutes.match(id, "2026-12-02"); });
  CHECK(n.muted == 1);
  CHECK(n.code == 1);
  CHECK(cases[0].result == TestResult::Muted);
  CHECK(cases[0].muted == "issue #1 (until 2026-12-02)");
  CHECK(cases[1].result == TestResult::Passed);
  CHECK(cases[2].result == TestResult::Victim);
  CHECK(cases[3].result == TestResult::Failed);
}

TEST_CASE("runner.yml tests: mutes are read with their place, wrong ones are errors at their line, lint warns on an expired one",
          "[tests][config]") {
  TempDir t;
  auto ok = t.write("runner.yml", R"(tests:
  window-days: 7
  retention-days: 60
  max-muted: 3
  mute:
    - {id: "tests/st/test_a.py::*", reason: "pypto#2396", until: 2099-12-31}
    - id: tests/st/test_b.py::test_old
      reason: fixed since
      until: 2020-01-01
)");
  pto::Diagnostics d;
  pto::RunnerConfig cfg = pto::load_runner_config(ok.string(), "runner.yml", d);
  INFO((d.items().empty() ? "" : d.items()[0].message));
  CHECK_FALSE(d.has_errors());
  CHECK(cfg.tests.window_days == 7);
  CHECK(cfg.tests.retention_days == 60);
  CHECK(cfg.tests.max_muted == 3);
  REQUIRE(cfg.tests.mute.size() == 2);
  CHECK(cfg.tests.mute[0].id == "tests/st/test_a.py::*");
  CHECK(cfg.tests.mute[1].line == 7);
  pto::Diagnostics lint;
  pto::lint_expired_mutes(cfg, "2026-12-02", lint);
  REQUIRE(lint.items().size() == 1);
  CHECK(lint.items()[0].severity == pto::Severity::Warning);
  CHECK(lint.items()[0].rule == "expired-mute");
  CHECK(lint.items()[0].line == 7);
  CHECK(lint.items()[0].message.find("tests/st/test_b.py::test_old") != std::string::npos);

  auto bad = t.write("bad.yml", R"(tests:
  max-muted: 1
  mute:
    - {id: a, reason: r, until: 2026-02-30}
    - {id: b, until: 2099-01-01}
    - {id: c, reason: r, until: 2099-01-01}
    - {id: d, reason: r, until: 2099-01-01, owner: me}
)");
  pto::Diagnostics d2;
  pto::load_runner_config(bad.string(), "bad.yml", d2);
  d2.sort();
  std::string all;
  for (const auto& i : d2.items()) all += pto::format_diagnostic(i) + "\n";
  INFO(all);
  CHECK(all.find("bad.yml:4:") != std::string::npos);
  CHECK(all.find("'until' is a date like 2026-12-31, got '2026-02-30'") != std::string::npos);
  CHECK(all.find("bad.yml:5:") != std::string::npos);
  CHECK(all.find("reason") != std::string::npos);
  CHECK(all.find("owner") != std::string::npos);
  CHECK(all.find("more than max-muted (1)") != std::string::npos);
}

TEST_CASE("test history: flips per test and ref, flaky, most failing, slowest, while a card's failures and a bad day say nothing "
          "about a test, and the window, another ref, one test's history, retention and mutes kept", "[tests][store]") {
  TempDir t;
  const std::string path = (t.path() / "journal.sqlite").string();
  std::string error;
  auto journal = pto::Journal::open(path, error);
  REQUIRE(journal);
  auto h = pto::TestHistory::open(path, error);
  INFO(error);
  REQUIRE(h);
  const double now = pto::epoch_now();
  const std::string main = "refs/heads/main", pr = "refs/pull/7/merge";
  auto record = [&](const std::string& run, const std::string& ref, double at, std::vector<TestCase> cases) {
    pto::StepTests st{run, ref, "abc", "system-tests / Run system tests", at, cases};
    REQUIRE(h->record(st));
  };
  record("r1", main, now - 3600 * 5,
         {tc("a", TestResult::Passed), tc("b", TestResult::Failed, 2), tc("c", TestResult::Victim), tc("d", TestResult::Passed, 5)});
  record("r2", main, now - 3600 * 4,
         {tc("a", TestResult::Passed), tc("b", TestResult::Passed, 2), tc("c", TestResult::Passed), tc("d", TestResult::Passed, 7)});
  // a fails, then passes on the rerun: flaky, two flips (pass -> fail -> pass).
  TestCase a3 = tc("a", TestResult::Passed, 1, 2);
  a3.cause = FailureCause::Flaky;
  record("r3", main, now - 3600 * 3, {tc("a", TestResult::Failed), a3, tc("b", TestResult::Passed, 2), tc("c", TestResult::Passed)});
  // A bad day: 9 of 10 tests fail at once (the host's, not theirs): a's failure is no flip.
  std::vector<TestCase> bad_day = {tc("a", TestResult::Failed)};
  for (int i = 0; i < 8; ++i) bad_day.push_back(tc("x" + std::to_string(i), TestResult::Failed));
  bad_day.push_back(tc("b", TestResult::Passed, 2));
  record("r4", main, now - 3600 * 2, bad_day);
  // Another ref, and an old result outside the window.
  record("p1", pr, now - 3600, {tc("b", TestResult::Failed, 3)});
  record("old", main, now - 20 * 86400, {tc("z", TestResult::Failed)});

  pto::TestHistoryQueries q(path);
  json s = q.ref_summary(main, now - 14 * 86400, 20);
  INFO(s.dump(1));
  REQUIRE_FALSE(s.contains("error"));
  CHECK(s["tests"] == 12);  // a b c d x0..x7 (z is older than the window)
  const json* fa = find_id(s["flaky"], "a");
  REQUIRE(fa);
  CHECK((*fa)["flips"] == 2);
  CHECK((*fa)["flaky"] == 1);
  CHECK((*fa)["runs"] == 4);
  CHECK((*fa)["flip_rate"] == Approx(0.5));  // 2 flips in 4 outcomes (r4's not counted)
  const json* fb = find_id(s["flaky"], "b");
  REQUIRE(fb);
  CHECK((*fb)["flips"] == 1);
  CHECK((*fb)["flip_rate"] == Approx(0.333).epsilon(0.01));  // r1 fail, r2 pass, r3 pass (r4 not counted)
  CHECK_FALSE(find_id(s["flaky"], "c"));  // its victim is the card's
  CHECK(s["flaky"][0]["id"] == "a");      // the highest flip rate first
  REQUIRE(find_id(s["most_failing"], "a"));
  CHECK((*find_id(s["most_failing"], "b"))["failed"] == 1);  // the pull request's failure is its own ref's
  CHECK(s["slowest"][0]["id"] == "d");
  CHECK(s["slowest"][0]["mean_duration"] == Approx(6));
  CHECK(s["slowest"][0]["max_duration"] == Approx(7));
  CHECK_FALSE(find_id(s["most_failing"], "z"));
  json wide = q.ref_summary(main, now - 30 * 86400, 20);
  CHECK(find_id(wide["most_failing"], "z"));

  json b = q.test_history("b", now - 14 * 86400, 200);
  INFO(b.dump(1));
  REQUIRE(b["refs"].size() == 2);
  CHECK(b["refs"][1]["ref"] == pr);
  CHECK(b["refs"][1]["failed"] == 1);
  CHECK(b["refs"][0]["failed"] == 1);  // main's: r1
  REQUIRE(b["results"].size() == 5);
  CHECK(b["results"][0]["run"] == "p1");  // newest first
  CHECK(b["results"][0]["result"] == "failed");
  CHECK(b["results"][0]["message"] == "AssertionError: wrong");
  CHECK(b["results"][4]["run"] == "r1");
  CHECK(q.test_history("nobody", now - 86400, 10)["results"].empty());

  CHECK(h->flaky_since(now - 86400) == 1);

  pto::TestMute m{"tests/x.py::*", "pypto#1", "2099-01-01", "admin (127.0.0.1)", "2026-12-02T00:00:00.000Z"};
  REQUIRE(h->save_mutes({m}));
  REQUIRE(h->load_mutes().size() == 1);
  CHECK(h->load_mutes()[0].by == "admin (127.0.0.1)");
  REQUIRE(h->save_mutes({}));
  CHECK(h->load_mutes().empty());

  // Retention: everything before the cutoff goes, rows and sums.
  REQUIRE(h->prune(now - 3600 * 2.5));
  json after = q.test_history("b", now - 30 * 86400, 200);
  CHECK(after["results"].size() == 2);  // r4 and p1 are younger than the cutoff
  REQUIRE(h->prune(now + 86400 * 2));
  CHECK(q.ref_summary(main, now - 30 * 86400, 20)["tests"] == 0);

  // A journal that cannot be read answers with the error, never throws.
  pto::TestHistoryQueries nowhere((t.path() / "missing/journal.sqlite").string());
  CHECK(nowhere.ref_summary(main, 0, 5).contains("error"));
}

TEST_CASE("muted tests: a muted failure leaves its step green and shown as muted, an expired mute mutes nothing, the admin's mutes "
          "survive a restart, and the history's API, metrics and pages", "[tests][daemon]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  Served s;
  for (const char* dir : {"muted", "expired", "api"}) {
    fs::create_directories(s.dir.path() / dir);
    std::ofstream(s.dir.path() / dir / (std::string("test_") + dir + ".py"))
        << "def test_ok(): pass\ndef test_bad():\n    assert 1 == 2, 'still broken'\n";
  }
  fs::create_directories(s.dir.path() / "flaky");
  std::ofstream(s.dir.path() / "flaky/test_flaky.py")
      << "import os\nMARK = os.path.join(os.path.dirname(__file__), 'ran-once')\n"
         "def test_flaky():\n    first = not os.path.exists(MARK)\n    open(MARK, 'w').close()\n    assert not first, 'first time'\n";
  s.dir.write("runner.yml", R"(tests:
  mute:
    - {id: "muted/test_muted.py::test_bad", reason: "pypto#2396", until: 2099-12-31}
    - {id: "expired/*", reason: "was broken", until: 2020-01-01}
)");
  const std::string py = kPytest;
  write_project(s.dir, {{"muted.yml", "name: muted\nsteps:\n  - tests: pytest\n    run: " + py + " muted\n"},
                        {"expired.yml", "name: expired\nsteps:\n  - tests: pytest\n    run: " + py + " expired\n"},
                        {"api.yml", "name: api\nsteps:\n  - tests: pytest\n    run: " + py + " api\n"},
                        {"flaky.yml", "name: flaky\nsteps:\n  - tests: pytest\n    run: " + py + " flaky\n"}});
  auto submit = [&](const std::string& job) { return s.wait_run(s.submit_run({{"jobs", {job}}, {"ref", "refs/heads/main"}, {"sha", "f00d"}}), 60); };
  s.start();

  json muted = submit("muted");
  const json& ms = step_of(muted);
  INFO(ms.dump(1));
  CHECK(ms["state"] == "succeeded");
  CHECK(ms["tests"]["muted"] == 1);
  CHECK(ms["tests"]["failed"] == 0);
  CHECK(ms["attempt"] == 1);  // nothing to rerun
  CHECK(ms["verdict"].get<std::string>().find("1 muted failure (muted/test_muted.py::test_bad: pypto#2396") != std::string::npos);
  bool shown = false;
  for (const auto& c : ms["tests"]["cases"])
    if (c["id"] == "muted/test_muted.py::test_bad") shown = c["result"] == "muted" && c["message"].get<std::string>().find("still broken") != std::string::npos;
  CHECK(shown);
  // In the run's JUnit it is skipped, saying it was muted and why.
  const std::string junit = pto::api_request("GET", s.url(pto::api_path::run_junit(muted["id"]))).body;
  CHECK(junit.find("<skipped message=\"muted (pypto#2396 (until 2099-12-31)): AssertionError: still broken") != std::string::npos);

  json expired = submit("expired");
  CHECK(step_of(expired)["state"] == "failed");
  CHECK(step_of(expired)["tests"]["muted"] == 0);

  // The admin's mute: refused to others and for a day gone by, kept across a restart.
  const json mute = {{"id", "api/test_api.py::test_bad"}, {"reason", "pypto#2598"}, {"until", "2099-01-31"}};
  CHECK(s.post(pto::api_path::tests_mute(), mute, "").status == 401);
  auto past = s.post(pto::api_path::tests_mute(), {{"id", "x"}, {"reason", "r"}, {"until", "2020-01-01"}});
  CHECK(past.status == 400);
  CHECK(past.body.find("until") != std::string::npos);
  CHECK(s.post(pto::api_path::tests_mute(), {{"id", "x"}, {"reason", "r"}}).status == 400);
  auto made = s.post(pto::api_path::tests_mute(), mute);
  INFO(made.body);
  REQUIRE(made.status == 200);
  CHECK(json::parse(made.body)["in_force"] == 2);
  CHECK(step_of(submit("api"))["state"] == "succeeded");
  s.stop();
  s.start();
  json listed = s.get(std::string(pto::api_path::kTests) + "?ref=refs/heads/main");
  INFO(listed.dump(1));
  const json* kept = find_id(listed["muted"], "api/test_api.py::test_bad");
  REQUIRE(kept);
  CHECK((*kept)["by"].get<std::string>().rfind("admin", 0) == 0);
  CHECK((*kept)["in_force"] == true);
  const json* gone = find_id(listed["muted"], "expired/*");
  REQUIRE(gone);
  CHECK((*gone)["in_force"] == false);
  json api_again = submit("api");
  CHECK(step_of(api_again)["state"] == "succeeded");
  CHECK(step_of(api_again)["tests"]["muted"] == 1);
  CHECK(s.post(pto::api_path::tests_unmute(), {{"id", "muted/test_muted.py::test_bad"}}).status == 409);  // runner.yml's
  CHECK(s.post(pto::api_path::tests_unmute(), {{"id", "api/test_api.py::test_bad"}}).status == 200);
  CHECK(s.post(pto::api_path::tests_unmute(), {{"id", "api/test_api.py::test_bad"}}).status == 404);
  CHECK(step_of(submit("api"))["state"] == "failed");

  json flaky = submit("flaky");
  CHECK(step_of(flaky)["state"] == "succeeded");

  // The history (written off the engine thread, in order): the flaky test, the failing one, one test's
  // results with their runs.
  json h;
  REQUIRE(wait_until([&] {
    h = s.get(std::string(pto::api_path::kTests) + "?ref=refs/heads/main");
    return find_id(h["flaky"], "flaky/test_flaky.py::test_flaky") != nullptr;
  }, 20));
  INFO(h.dump(1));
  const json* fl = find_id(h["flaky"], "flaky/test_flaky.py::test_flaky");
  REQUIRE(fl);
  CHECK((*fl)["flaky"] == 1);
  CHECK((*fl)["flips"] == 1);  // failed, then passed
  const json* failing = find_id(h["most_failing"], "api/test_api.py::test_bad");
  REQUIRE(failing);
  CHECK((*failing)["failed"] == 3);  // failed each time it ran, muted or not
  CHECK(s.get(std::string(pto::api_path::kTests) + "?ref=refs/pull/1/merge")["tests"] == 0);
  CHECK(pto::api_request("GET", s.url(std::string(pto::api_path::kTests) + "?limit=0")).status == 400);
  const std::string one = std::string(pto::api_path::kTests) + "/" + url_encode("expired/test_expired.py::test_bad");
  json e = s.get(one);
  INFO(e.dump(1));
  REQUIRE(e["results"].size() == 2);  // it failed, and failed again on its rerun
  CHECK(e["results"][0]["run"] == expired["id"]);
  CHECK(e["results"][0]["attempt"] == 2);
  CHECK(e["results"][1]["attempt"] == 1);
  CHECK(e["results"][0]["result"] == "failed");
  CHECK(e["refs"][0]["failed"] == 1);
  CHECK(pto::api_request("GET", s.url(std::string(pto::api_path::kTests) + "/nope")).status == 404);

  std::string metrics;
  CHECK(wait_until([&] {
    metrics = pto::api_request("GET", s.url(pto::api_path::kMetrics)).body;
    return metrics.find("pto_runner_tests_flaky 1\n") != std::string::npos;
  }, 10));
  CHECK(metrics.find("pto_runner_tests_muted 1\n") != std::string::npos);  // runner.yml's one in force
  // Since this start: api's muted, then failed; the flaky one passed at its last attempt.
  CHECK(metrics.find("pto_runner_tests_total{result=\"failed\"} 1\n") != std::string::npos);
  CHECK(metrics.find("pto_runner_tests_total{result=\"muted\"} 1\n") != std::string::npos);
  CHECK(metrics.find("pto_runner_tests_total{result=\"passed\"} ") != std::string::npos);

  std::string dom;
  if (s.page_dom(dom, "/tests?ref=refs/heads/main")) {
    INFO(dom.substr(0, 4000));
    CHECK(dom.find("data-test=\"flaky/test_flaky.py::test_flaky\"") != std::string::npos);
    CHECK(dom.find("pypto#2396") != std::string::npos);  // the muted table
    CHECK(dom.find("class=\"error\"") == std::string::npos);  // no banner: both reads answered
    std::string run_dom;
    REQUIRE(s.page_dom(run_dom, pto::api_path::run_page(expired["id"])));
    CHECK(run_dom.find("class=\"failed-tests\"") != std::string::npos);
    CHECK(run_dom.find("data-test=\"expired/test_expired.py::test_bad\"") != std::string::npos);
    CHECK(run_dom.find("still broken") != std::string::npos);
    std::string one_dom;
    REQUIRE(s.page_dom(one_dom, "/tests?test=" + url_encode("expired/test_expired.py::test_bad")));
    CHECK(one_dom.find(expired["id"].get<std::string>()) != std::string::npos);
  }
}

TEST_CASE("tests: pto-runner tests mute, list and unmute work the API's mutes from the command line, with the admin token, and a "
          "bad date or no token is refused (exit 2)", "[tests][daemon]") {
  Served s;
  write_project(s.dir, {{"one.yml", "name: one\nsteps:\n  - run: 'true'\n"}});
  s.start();
  const std::map<std::string, std::string> admin = {{"PTO_RUNNER_TOKEN", s.token}};
  CommandResult muted = run_cli({"tests", "--server", s.url(), "mute", "tests/st/test_moe.py::*", "--reason", "pypto#2598", "--until",
                                 "2099-12-31"},
                                admin);
  INFO(muted.out << muted.err);
  CHECK(muted.exit_code == 0);
  CHECK(muted.out.find("muted tests/st/test_moe.py::* until 2099-12-31") != std::string::npos);
  CommandResult listed = run_cli({"tests", "--server", s.url(), "list", "--format", "json"});
  INFO(listed.out << listed.err);
  REQUIRE(listed.exit_code == 0);
  const json mutes = json::parse(listed.out)["muted"];
  REQUIRE(mutes.size() == 1);
  CHECK(mutes[0]["id"] == "tests/st/test_moe.py::*");
  CHECK(mutes[0]["reason"] == "pypto#2598");
  CHECK(run_cli({"tests", "--server", s.url(), "list"}).out.find("MUTED (1)") != std::string::npos);
  // Refused: a date gone by, and no admin token.
  CommandResult late = run_cli({"tests", "--server", s.url(), "mute", "x", "--reason", "r", "--until", "2000-01-01"}, admin);
  CHECK(late.exit_code == 2);
  CHECK(late.err.find("until") != std::string::npos);
  CHECK(run_cli({"tests", "--server", s.url(), "mute", "y", "--reason", "r", "--until", "2099-01-01"}).exit_code == 2);
  CHECK(run_cli({"tests", "--server", s.url(), "unmute", "tests/st/test_moe.py::*"}, admin).exit_code == 0);
  CHECK(json::parse(run_cli({"tests", "--server", s.url(), "list", "--format", "json"}).out)["muted"].empty());
}
