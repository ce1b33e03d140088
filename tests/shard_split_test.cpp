// Test suites split across shards by learned durations (testcases/shard_split): the policy on made-up suites,
// `split:` as a step key (its errors at their line), and a real pytest suite split by a daemon.
#include <catch2/catch.hpp>

#include <fstream>
#include <numeric>
#include <random>
#include <set>

#include "served_daemon.h"
#include "testcases/shard_split.h"
#include "util/secret_mask.h"
#include "test_support.h"

using namespace pto;
using namespace pto::test;

TEST_CASE("test split: longest first onto the least loaded shard, unknown tests at the median, every test exactly once", "[tests]") {
  // Two long tests in one file, many short ones: the long ones go to different shards.
  std::vector<std::string> ids = {"a.py::long1", "a.py::long2"};
  std::map<std::string, double> learned = {{"a.py::long1", 100}, {"a.py::long2", 90}};
  for (int i = 0; i < 20; ++i) {
    ids.push_back("b.py::short" + std::to_string(i));
    learned[ids.back()] = 10;
  }
  ids.push_back("c.py::new");  // never seen: counts the median (10)
  ids.push_back("a.py::long1");  // collected twice (two paths to one test): once
  TestShards s = split_by_duration(ids, learned, 2);
  REQUIRE(s.tests.size() == 2);
  CHECK(s.unknown == 1);
  std::multiset<std::string> all;
  for (const auto& shard : s.tests) all.insert(shard.begin(), shard.end());
  CHECK(all.size() == 23);
  CHECK(std::set<std::string>(all.begin(), all.end()).size() == 23);
  const bool long1_first = std::count(s.tests[0].begin(), s.tests[0].end(), "a.py::long1") == 1;
  CHECK(std::count(s.tests[long1_first ? 1 : 0].begin(), s.tests[long1_first ? 1 : 0].end(), "a.py::long2") == 1);
  // 100 + 90 + 21 x 10 = 400: 200 each.
  CHECK(s.expected_seconds[0] == Approx(200));
  CHECK(s.expected_seconds[1] == Approx(200));
  CHECK(shard_imbalance(s, learned) == Approx(1.0).margin(0.03));
  // Each shard in collection order: a.py's test before b.py's.
  for (const auto& shard : s.tests)
    for (std::size_t i = 1; i < shard.size(); ++i)
      CHECK(std::find(ids.begin(), ids.end(), shard[i - 1]) < std::find(ids.begin(), ids.end(), shard[i]));
  // Nothing learned: by count; more shards than tests: some empty.
  s = split_by_duration({"x::1", "x::2", "x::3"}, {}, 5);
  int empty = 0;
  for (const auto& shard : s.tests) empty += shard.empty();
  CHECK(empty == 2);
  CHECK(s.unknown == 3);
}

TEST_CASE("test split: pypto's shape (a few long tests in heavy files) is far more even by duration than by counting files", "[tests]") {
  std::mt19937 rng(2063);
  std::lognormal_distribution<double> short_s(std::log(3.0), 0.6), long_s(std::log(120.0), 0.5);
  std::vector<std::string> ids;
  std::map<std::string, double> real;
  for (int f = 0; f < 40; ++f)
    for (int t = 0; t < 20; ++t) {
      ids.push_back("tests/st/dir" + std::to_string(f / 10) + "/test_" + std::to_string(f) + ".py::case" + std::to_string(t));
      real[ids.back()] = f < 6 && t < 3 ? long_s(rng) : short_s(rng);  // the heavy files sort first
    }
  const double by_files = shard_imbalance(split_by_file_count(ids, real, 4), real);
  const double by_duration = shard_imbalance(split_by_duration(ids, real, 4), real);
  INFO("by files " << by_files << ", by duration " << by_duration);
  CHECK(by_duration < 1.05);
  CHECK(by_files > 1.5);
}

TEST_CASE("test split: split: is checked where it is written", "[tests][lint]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n"
                              "  - {name: ok, tests: pytest, split: {shards: 4}, run: 'true'}\n"
                              "  - {name: no-tests, split: {shards: 4}, run: 'true 2'}\n"
                              "  - {name: one, tests: pytest, split: {shards: 1}, run: 'true 3'}\n"
                              "  - {name: by, tests: pytest, split: {shards: 2, by: files}, run: 'true 4'}\n"}});
  auto r = run_cli({"lint", "--root", d.str()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("jobs/a.yml:4:29: error: step: 'split' needs 'tests: pytest'") != std::string::npos);
  CHECK(r.out.find("jobs/a.yml:5:48: error: split: 'shards' must be between 2 and 64, got 1 [bad-value]") != std::string::npos);
  CHECK(r.out.find("jobs/a.yml:6:54: error: split: 'by' is duration (learned per-test durations), got 'files'") != std::string::npos);
  CHECK(r.out.find("a.yml:3:") == std::string::npos);
  d.write("jobs/a.yml", "name: a\nsteps:\n  - {name: ok, tests: pytest, split: {shards: 4}, run: 'true'}\n");
  r = run_cli({"plan", "--root", d.str()});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("ok (collect)  [collects the tests of 4 shards, split by duration]") != std::string::npos);
  for (int i = 1; i <= 4; ++i) CHECK(r.out.find("ok (shard " + std::to_string(i) + "/4)") != std::string::npos);
  // The same split step twice in a job: the second is the first's work, shard by shard.
  d.write("jobs/a.yml", "name: a\nsteps:\n  - {name: ok, tests: pytest, split: {shards: 2}, run: 'true'}\n"
                       "  - {name: again, tests: pytest, split: {shards: 2}, run: 'true'}\n");
  r = run_cli({"plan", "--root", d.str(), "--format", "json"});
  REQUIRE(r.exit_code == 0);
  const nlohmann::json steps = nlohmann::json::parse(r.out)["jobs"][0]["steps"];
  REQUIRE(steps.size() == 6);
  CHECK(steps[0]["kind"] == "collect-tests");
  CHECK(steps[1]["shard"]["index"] == 1);
  CHECK(steps[2]["shard"]["collect_step"] == 0);
  for (int i = 3; i < 6; ++i) CHECK(steps[i]["deduplicated_from_index"] == i - 3);
}

namespace {

// 40 tests: 4 long ones at collection positions 0, 4, 8 and 12 (what a split by count, round-robin, puts on
// one shard) and 36 short ones of uneven lengths. Each prints a marker line to the real terminal (-s).
void write_uneven_suite(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream t(dir / "test_uneven.py");
  t << "import os, time, pytest\n\n"
       "SECONDS = [" ;
  for (int i = 0; i < 40; ++i) t << (i % 4 == 0 && i < 16 ? "1.5" : std::to_string(0.1 + 0.05 * (i % 7))) << ",";
  t << "]\n\n"
       "@pytest.mark.parametrize('n', range(40))\n"
       "def test_case(n):\n"
       "    os.write(1, ('RAN %s\\n' % os.environ['PYTEST_CURRENT_TEST'].split(' ')[0]).encode())\n"
       "    time.sleep(SECONDS[n])\n";
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("test split: a real pytest suite of 40 uneven tests in 4 shards: collected once, every test run exactly once, and once a run "
          "has taught the durations the shards' real durations are within 20% of each other", "[tests][daemon]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  Served s;
  s.devices = "0-3";
  write_uneven_suite(s.dir.path() / "suite");
  write_project(s.dir, {{"st.yml", std::string("name: st\nsteps:\n  - name: system tests\n    devices: 1\n    tests: pytest\n"
                                               "    split: {shards: 4, by: duration}\n    run: ") + kPytest + " -s suite\n"}});
  s.start();
  std::vector<double> real_first, real_second;
  for (int round = 1; round <= 2; ++round) {
    const std::string id = s.submit_run();
    const json run = s.wait_run(id, 120);
    INFO("round " << round << ": " << run.dump(1).substr(0, 8000));
    REQUIRE(run["state"] == "succeeded");
    const json& steps = run["jobs"][0]["steps"];
    REQUIRE(steps.size() == 5);
    const json& collect = steps[0];
    CHECK(collect["name"] == "system tests (collect)");
    CHECK(collect["cards"].empty());
    REQUIRE(collect["split"]["collected"] == 40);
    // Nothing learned before the first run; everything after it.
    CHECK(collect["split"]["without_duration"] == (round == 1 ? 40 : 0));
    CHECK(collect["split"]["tests"]["ran"] == 40);
    CHECK(collect["split"]["tests"]["passed"] == 40);
    // The collection ran no test: its log has no marker.
    CHECK(count_of(read_file(collect["log_path"].get<std::string>()), "RAN ") == 0);
    std::map<std::string, int> reported, ran;
    std::vector<double>& real = round == 1 ? real_first : real_second;
    std::vector<double> expected;
    for (int i = 1; i <= 4; ++i) {
      const json& shard = steps[i];
      CHECK(shard["name"] == "system tests (shard " + std::to_string(i) + "/4)");
      CHECK(shard["state"] == "succeeded");
      CHECK(shard["cards"].size() == 1);
      CHECK(shard["shard"]["tests"] == shard["tests"]["ran"]);
      for (const auto& c : shard["tests"]["cases"]) ++reported[c["id"].get<std::string>()];
      const std::string log = read_file(shard["log_path"].get<std::string>());
      for (std::size_t p = log.find("RAN "); p != std::string::npos; p = log.find("RAN ", p + 1))
        ++ran[log.substr(p + 4, log.find('\n', p) - p - 4)];
      real.push_back(shard["shard"]["seconds"].get<double>());
      expected.push_back(shard["shard"]["expected_seconds"].get<double>());
    }
    // Every test ran exactly once, in exactly one shard, and reported once.
    CHECK(reported.size() == 40);
    CHECK(ran.size() == 40);
    for (const auto& [test, n] : reported) CHECK(n == 1);
    for (const auto& [test, n] : ran) CHECK(n == 1);
    if (round == 2) {
      // The split's own expectation is even (LPT on learned durations)...
      CHECK(*std::max_element(expected.begin(), expected.end()) <= 1.1 * *std::min_element(expected.begin(), expected.end()));
      // ...and so is what the shards really took.
      INFO("first run (split by count) " << real_first[0] << " " << real_first[1] << " " << real_first[2] << " " << real_first[3]
                                         << "; second (by duration) " << real[0] << " " << real[1] << " " << real[2] << " " << real[3]);
      CHECK(*std::max_element(real.begin(), real.end()) <= 1.2 * *std::min_element(real.begin(), real.end()));
      // By count, the four long tests had fallen on one shard.
      CHECK(*std::max_element(real_first.begin(), real_first.end()) > 1.5 * *std::min_element(real_first.begin(), real_first.end()));
    } else {
      // The history has the durations before the next run is planned: each test's, on any ref.
      // (404 until the history's writer thread has written the step's results.)
      REQUIRE(wait_until([&] {
        const auto r = pto::api_request("GET", s.url(std::string(pto::api_path::kTests) + "/" + pto::url_encode("suite/test_uneven.py::test_case[39]")));
        return r.status == 200 && !json::parse(r.body)["results"].empty();
      }, 10));
    }
  }
  // The run page shows the shards with what was expected of them and what they took.
  std::string dom;
  const json runs = s.get(pto::api_path::kRuns)["runs"];
  if (s.page_dom(dom, "/runs/" + runs[0]["id"].get<std::string>())) {
    CHECK(dom.find("class=\"shards\"") != std::string::npos);
    CHECK(dom.find("data-shard=\"4\"") != std::string::npos);
  }
}

TEST_CASE("test split: what the step's own -k and -m leave out is not collected, and a shard with no test is skipped", "[tests][daemon]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  Served s;
  s.devices = "0-3";
  fs::create_directories(s.dir.path() / "suite");
  std::ofstream(s.dir.path() / "suite" / "test_few.py") << "import pytest\n\n"
                                                         "@pytest.mark.parametrize('n', range(3))\n"
                                                         "def test_keep(n):\n    pass\n\n"
                                                         "def test_slow_one():\n    pass\n\n"
                                                         "@pytest.mark.hardware\n"
                                                         "def test_marked():\n    pass\n";
  write_project(s.dir, {{"st.yml", std::string("name: st\nsteps:\n  - name: few\n    tests: pytest\n"
                                               "    split: {shards: 4}\n    run: ") + kPytest + " -k 'not slow' -m 'not hardware' suite\n"}});
  s.start();
  const json run = s.wait_run(s.submit_run(), 60);
  INFO(run.dump(1).substr(0, 6000));
  CHECK(run["state"] == "succeeded");
  const json& steps = run["jobs"][0]["steps"];
  CHECK(steps[0]["split"]["collected"] == 3);  // test_keep[0..2]; not test_slow_one, not test_marked
  int ran = 0, skipped = 0;
  for (int i = 1; i <= 4; ++i) {
    if (steps[i]["state"] == "skipped") ++skipped;
    else ran += steps[i]["tests"]["ran"].get<int>();
  }
  CHECK(ran == 3);
  CHECK(skipped == 1);  // 3 tests in 4 shards
}
