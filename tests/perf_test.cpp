// Performance judged like an experiment (perf/, engine/engine_perf.cpp; SPEC "Performance, judged like an
// experiment"): `perf:` read and linted at its line, the history's change point, and a daemon whose perf step's
// samples come from a stand-in model script (no NPU here: it prints `Total Test Time: X us` from a seeded noise
// model, 8.5% jitter; a file in the project makes it slower).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include <regex>

#include <sqlite3.h>
#include <yaml-cpp/yaml.h>

#include "config/perf_spec.h"
#include "store/perf_history.h"
#include "perf/history_change.h"
#include "served_daemon.h"
#include "source_repo.h"
#include "test_support.h"

using namespace pto::test;

namespace {

std::string metrics_of(const Served& s) { return pto::api_request("GET", s.url("/metrics")).body; }

/// The stand-in model script (no NPU here): prints `Total Test Time: X us`, X being 1000 us times the build's own
/// factor (its file `slow`, 1 without), its card's (card 1 is 6% slower than card 0), a drift of `drift` a sample
/// and log-normal jitter of `jitter`, seeded by a counter at `count`, outside the trees and locked while it is
/// counted: samples taken one after another see the same sequence each time the test runs.
std::string stand_in_model(const std::string& count, double jitter, double drift) {
  return "import fcntl, math, os, random\n"
         "with open('" + count + "', 'a+') as f:\n"  // probes of two commits may run at once: one at a time
         "    fcntl.flock(f, fcntl.LOCK_EX)\n"
         "    f.seek(0)\n"
         "    t = f.read()\n"
         "    n = int(t) if t else 0\n"
         "    f.seek(0)\n"
         "    f.truncate()\n"
         "    f.write(str(n + 1))\n"
         "random.seed(n)\n"
         "slow = float(open('slow').read()) if os.path.exists('slow') else 1.0\n"
         "card = {'0': 1.0, '1': 1.06}.get(os.environ.get('TASK_DEVICE', ''), 1.0)\n"
         "print('Total Test Time: %.2f us' % (1000 * slow * card * (1 + " + std::to_string(drift) + " * n) * math.exp(random.gauss(0, " +
         std::to_string(jitter) + "))))\n";
}

}  // namespace

TEST_CASE("perf: lint refuses a metric without exactly one group, or no regex, at its line, and an unknown compare", "[perf]") {
  TempDir d;
  write_project(d, {{"p.yml", "name: p\nsteps:\n  - name: decode\n    devices: 1\n    run: ./bench\n"
                              "    perf:\n      metric: 'Total (\\d+) (\\d+)'\n"
                              "  - name: other\n    run: ./bench\n    perf: {metric: '([0-9', compare: yesterday}\n"}});
  CommandResult r = run_cli({"lint", "--root", d.str()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("jobs/p.yml:7:15: error: perf: 'metric' needs exactly one group") != std::string::npos);
  CHECK(r.out.find("[perf-metric]") != std::string::npos);
  CHECK(r.out.find("jobs/p.yml:10:") != std::string::npos);
  CHECK(r.out.find("'metric' is not a regex") != std::string::npos);
  CHECK(r.out.find("'compare' is base or history, got 'yesterday'") != std::string::npos);
}

TEST_CASE("perf: a model example's perf: is its step's, named for the example unless it says, and plan shows it", "[perf]") {
  TempDir d;
  write_project(d, {{"m.yml", "name: m\nsteps:\n  - name: Run {model} {example}\n    models: [qwen]\n"}},
                {{"qwen.yml", "model: Qwen3-14B\ndir: models/qwen3_14b\ncommand: python {dir}/{example}.py -d $TASK_DEVICE {args}\n"
                              "examples:\n  - {name: decode_fwd, args: --enable-l2-swimlane, perf: {metric: 'Total Test Time: ([0-9.]+) us', "
                              "unit: us, compare: history}}\n  - {name: prefill_fwd}\n"}});
  CommandResult plan = run_cli({"--root", d.str(), "plan", "--format", "json"});
  INFO(plan.out << plan.err);
  REQUIRE(plan.exit_code == 0);
  const json steps = json::parse(plan.out)["jobs"][0]["steps"];
  REQUIRE(steps.size() == 2);
  CHECK(steps[0]["perf"]["metric"] == "Run Qwen3-14B decode_fwd");
  CHECK(steps[0]["perf"]["compare"] == "history");
  CHECK(steps[0]["perf"]["samples"] == 5);
  CHECK(steps[1]["perf"].is_null());
  CommandResult text = run_cli({"--root", d.str(), "plan"});
  CHECK(text.out.find("[perf Run Qwen3-14B decode_fwd: 5 samples against history]") != std::string::npos);
}

TEST_CASE("perf: a sample's number is the last match on a line, long lines are passed over, and a hostile pattern meets a long "
          "output in bounded time", "[perf]") {
  pto::Diagnostics d;
  auto spec = [&](const std::string& metric) {
    return pto::read_perf(YAML::Load("{metric: '" + metric + "'}"), "jobs/p.yml", d);
  };
  const auto total = spec("Total Test Time: ([0-9.]+) us");
  REQUIRE(total);
  CHECK(*total->read("warm up\nTotal Test Time: 1016.66 us\nnoise\nTotal Test Time: 990.5 us\n") == Approx(990.5));
  CHECK_FALSE(total->read("Total Test Time: -3 us\nTotal Test Time: x us\n"));  // a positive number or nothing
  CHECK_FALSE(total->read(std::string(8192, ' ') + "Total Test Time: 5 us\n"));  // a line of 8 KiB: passed over
  // A pull request's own pattern and output: nested repetition over a long line of what almost matches.
  const auto hostile = spec("^(a|aa)+b");
  REQUIRE(hostile);
  std::string output;
  for (int i = 0; i < 200; ++i) output += std::string(4000, 'a') + "\n";
  CHECK_FALSE(hostile->read(output));  // answered (no match), without backtracking for ever
  CHECK(d.items().empty());
}

TEST_CASE("perf: the history's change point names the run where a change began, and noise alone is no change", "[perf]") {
  std::mt19937 rng(52);
  std::normal_distribution<double> noise(0, 0.025);  // a run median's spread (10 samples of 8.5% jitter: ~3%)
  std::vector<pto::RunMedian> series;
  for (int i = 0; i < 10; ++i) series.push_back({"r" + std::to_string(i), "c" + std::to_string(i), 1000 * std::exp(noise(rng))});
  pto::HistoryOptions o;
  o.threshold = 0.05;
  pto::HistoryVerdict calm = pto::judge_history(series, o);
  CHECK(calm.kind == pto::HistoryVerdict::Kind::NoChange);
  CHECK(calm.text(0.05) == "no change beyond +-5.0% over 10 runs");
  for (int i = 10; i < 13; ++i) series.push_back({"r" + std::to_string(i), "c" + std::to_string(i), 1200 * std::exp(noise(rng))});
  pto::HistoryVerdict slow = pto::judge_history(series, o);
  INFO(slow.text(0.05));
  CHECK(slow.kind == pto::HistoryVerdict::Kind::Slower);
  CHECK(slow.since_run == "r10");
  CHECK(slow.change > 0.12);
  CHECK(slow.change < 0.28);
  CHECK_FALSE(slow.began_now);
  CHECK(slow.text(0.05).find("since run r10 (commit c10): 10 runs before, 3 since") != std::string::npos);
  CHECK(pto::judge_history({series.begin(), series.begin() + 3}, o).kind == pto::HistoryVerdict::Kind::TooFew);
}

TEST_CASE("perf: a daemon's perf step takes its samples on one card, keeps them as history, and a gated step goes red for the "
          "run that made it slower, not for the runs after it", "[perf][daemon]") {
  Served s;
  s.devices = "0,1";
  // 8.5% jitter; 20% slower while the project has a file `slow` saying so.
  s.dir.write("model.py", stand_in_model((s.dir.path() / "count").string(), 0.085, 0));
  write_project(s.dir, {{"perf.yml", "name: perf\nsteps:\n  - name: Qwen3-14B decode\n    devices: 1\n    run: python3 model.py\n"
                                     "    perf: {name: qwen3-decode, metric: 'Total Test Time: ([0-9.]+) us', unit: us, samples: 10,\n"
                                     "           compare: history, threshold-pct: 5, gate: true}\n"}});
  s.start();
  auto run = [&] { return s.wait_run(s.submit_run({{"ref", "refs/heads/main"}}), 60); };
  auto step = [](const json& r) { return r["jobs"][0]["steps"][0]; };
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    const json r = run();
    INFO(r.dump(1));
    REQUIRE(r["state"] == "succeeded");
    ids.push_back(r["id"]);
    const json p = step(r)["perf"];
    CHECK(p["samples"].size() == 10);
    CHECK(p["cards"].size() == 1);
    if (i == 0) CHECK(p["verdict"].get<std::string>().find("no history to judge against yet") == 0);
  }
  // Every sample of a run on the card of its first.
  const json first = step(s.get(pto::api_path::run(ids[0])));
  const std::string log = pto::api_request("GET", s.url(pto::api_path::step_log(ids[0], "1-1"))).body;
  CHECK(log.find("pto-runner: perf sample 10 of 10: ") != std::string::npos);
  CHECK(step(s.get(pto::api_path::run(ids[5])))["perf"]["change"] == "none");

  s.dir.write("slow", "1.2\n");
  const json slower = run();
  INFO(slower.dump(1));
  CHECK(slower["state"] == "failed");  // gate: true, and the change began with this run
  CHECK(step(slower)["perf"]["change"] == "slower");
  CHECK(step(slower)["error"].get<std::string>().find("perf: slower by ") == 0);
  CHECK(step(slower)["verdict"].get<std::string>().find("qwen3-decode: median ") == 0);
  const json after = run();
  INFO(after.dump(1));
  CHECK(after["state"] == "succeeded");  // still slower, but since the run before: that one said so
  CHECK(step(after)["perf"]["verdict"].get<std::string>().find("since run " + slower["id"].get<std::string>()) != std::string::npos);

  // The history as the API gives it: 8 runs, oldest first, each with its samples and verdict.
  const json series = s.get(std::string(pto::api_path::kPerf) + "?metric=qwen3-decode&ref=refs/heads/main");
  INFO(series.dump(1));
  REQUIRE(series["series"].size() == 8);
  CHECK(series["series"][0]["run"] == ids[0]);
  CHECK(series["series"][6]["change"] == "slower");
  CHECK(series["series"][6]["median"].get<double>() > 1100);
  CHECK(series["series"][6]["samples"].size() == 10);
  CHECK(s.get(pto::api_path::kPerf)["metrics"] == json::array({{{"metric", "qwen3-decode"}, {"ref", "refs/heads/main"}}}));
  CHECK(pto::api_request("GET", s.url(std::string(pto::api_path::kPerf) + "?metric=x&limit=0")).status == 400);
  CHECK(metrics_of(s).find("pto_runner_perf_verdicts_total{metric=\"qwen3-decode\",change=\"slower\"} 2") != std::string::npos);
  CHECK(metrics_of(s).find("pto_runner_perf_samples_total 80") != std::string::npos);

  // The /perf page in Chromium: the series drawn, 8 runs, 80 samples, the change point at the run that began it.
  std::string dom;
  if (s.page_dom(dom, pto::api_path::kPerfPage)) {
    INFO(dom.substr(0, 3000));
    CHECK(dom.find("data-metric=\"qwen3-decode\"") != std::string::npos);
    std::size_t samples = 0;
    for (std::size_t at = 0; (at = dom.find("class=\"sample\"", at)) != std::string::npos; ++at) ++samples;
    CHECK(samples == 80);
    CHECK(dom.find("class=\"change-point\" data-change=\"slower\" data-run=\"" + slower["id"].get<std::string>() + "\"") != std::string::npos);
    CHECK(dom.find("class=\"median\"") != std::string::npos);
    CHECK(std::regex_search(dom, std::regex("<text x=\"4\" y=\"[0-9.]+\">[0-9]+\\.[0-9]</text>")));  // the axis's values, as text
    std::string status;  // the status page leads to it
    REQUIRE(s.page_dom(status, "/"));
    CHECK(status.find("id=\"nav-perf\" href=\"/perf\"") != std::string::npos);
  }
}

TEST_CASE("perf: compare: base measures a pull request's build and its merge base's in turns on one card: 12% slower is found "
          "with an interval holding 12% and a gated step goes red, an unchanged build is no change beyond +-8% and stays green",
          "[perf][daemon]") {
  Served s;
  s.devices = "0,1";
  SourceRepo repo;
  // 8.5% jitter and a slow drift; the pull request's build says it is 12% slower in its file `slow`.
  repo.write("model.py", stand_in_model((s.dir.path() / "count").string(), 0.085, 0.002));
  repo.write("jobs/perf.yml", "name: perf\nsteps:\n  - name: decode\n    devices: 1\n    run: python3 model.py\n"
                              "    perf: {name: decode, metric: 'Total Test Time: ([0-9.]+) us', unit: us, samples: 16, compare: base,\n"
                              "           threshold-pct: 8, gate: true}\n");
  const std::string base = repo.commit("main");
  const std::string git = "cd " + repo.path() + " && git -c user.name=t -c user.email=t@example.com ";
  REQUIRE(sh(git + "checkout -q -b slower " + base) == 0);
  repo.write("slow", "1.12\n");
  const std::string slower = repo.commit("12% slower");
  REQUIRE(sh(git + "checkout -q -b same " + base) == 0);
  repo.write("README.md", "reworded\n");
  const std::string same = repo.commit("docs");
  REQUIRE(sh(git + "checkout -q main") == 0);
  s.dir.write("runner.yml", "sandbox: off\nsource:\n  repo: " + repo.path() + "\n");
  s.start();
  auto step = [](const json& r) { return r["jobs"][0]["steps"][0]; };

  const json slow_run = s.wait_run(s.submit_run({{"sha", slower}, {"ref", "refs/pull/1/head"}}), 120);
  INFO(slow_run.dump(1));
  const json perf = step(slow_run)["perf"];
  const std::string verdict = perf["verdict"];
  std::smatch m;
  REQUIRE(std::regex_search(verdict, m, std::regex("^slower by ([0-9.]+)% \\(95% CI ([-0-9.]+)% to ([-0-9.]+)%\\) on card ([01]), ([0-9]+) pairs "
                                                   "against the merge base " + base.substr(0, 12))));
  CHECK(std::stod(m[2]) <= 12);
  CHECK(std::stod(m[3]) >= 12);
  const int pairs = std::stoi(m[5]);
  CHECK(pairs <= 16);
  CHECK(perf["samples"].size() == static_cast<std::size_t>(pairs));
  CHECK(perf["change"] == "slower");
  CHECK(slow_run["state"] == "failed");  // gate: true
  CHECK(step(slow_run)["error"].get<std::string>().find("perf: slower by ") == 0);
  // The merge base measured on the very card of the pull request's build, its samples kept with them.
  std::string base_id;
  REQUIRE(wait_until([&] {
    const json runs = s.get(pto::api_path::kRuns);
    for (const auto& r : runs["runs"])
      if (r["request"].value("ref", "") == "refs/pto-runner/perf-base/" + slow_run["id"].get<std::string>()) base_id = r["id"].get<std::string>();
    return !base_id.empty();
  }, 10));
  const json base_run = s.wait_run(base_id, 30);
  CHECK(step(base_run)["perf"]["cards"] == perf["cards"]);
  CHECK(step(base_run)["perf"]["samples"].size() == static_cast<std::size_t>(pairs));
  const json series = s.get(std::string(pto::api_path::kPerf) + "?metric=decode&ref=refs/pull/1/head");
  REQUIRE(series["series"].size() == 1);
  CHECK(series["series"][0]["base_samples"].size() == static_cast<std::size_t>(pairs));

  const json same_run = s.wait_run(s.submit_run({{"sha", same}, {"ref", "refs/pull/2/head"}}), 120);
  INFO(same_run.dump(1));
  CHECK(same_run["state"] == "succeeded");
  CHECK(step(same_run)["perf"]["change"] == "none");
  CHECK(step(same_run)["perf"]["verdict"].get<std::string>().rfind("no change beyond +-8.0%: ", 0) == 0);
  CHECK(step(same_run)["perf"]["verdict"].get<std::string>().find("against the merge base " + base.substr(0, 12)) != std::string::npos);
}

TEST_CASE("perf: bisect --metric over 30 commits names the commit that made it 12% slower, each probe a comparison with good on "
          "one card", "[perf][bisect][daemon]") {
  Served s;
  s.devices = "0,1";
  SourceRepo repo;
  // A quiet benchmark this time (3% jitter), so each probe's comparison stops at its first look.
  repo.write("model.py", stand_in_model((s.dir.path() / "count").string(), 0.03, 0));
  repo.write("jobs/perf.yml", "name: perf\nsteps:\n  - name: decode\n    devices: 1\n    run: python3 model.py\n"
                              "    perf: {name: decode, metric: 'Total Test Time: ([0-9.]+) us', unit: us, samples: 8, threshold-pct: 4}\n");
  std::vector<std::string> shas{repo.commit("commit 0")};
  for (int i = 1; i <= 30; ++i) {
    repo.write("n", std::to_string(i) + "\n");
    if (i == 17) repo.write("slow", "1.12\n");
    shas.push_back(repo.commit("commit " + std::to_string(i)));
  }
  s.dir.write("runner.yml", "sandbox: off\nsource:\n  repo: " + repo.path() + "\n");
  s.start();
  CommandResult cli = run_cli({"--root", repo.path(), "bisect", "--server", s.url(), "--metric", "decode", "--good", shas[0], "--bad", shas[30],
                               "--poll-interval", "0.2"},
                              {{"PTO_RUNNER_TOKEN", s.token}});
  INFO(cli.out << cli.err);
  CHECK(cli.exit_code == 0);
  CHECK(cli.out.find("first bad commit: " + shas[17]) != std::string::npos);
  const json list = s.get(pto::api_path::kBisections)["bisections"];
  REQUIRE(list.size() == 1);
  const json b = s.get(pto::api_path::bisection(list[0]["id"]));
  INFO(b.dump(1).substr(0, 4000));
  CHECK(b["spec"]["metric"] == "decode");
  // Each probe compared its commit with good on one card: its step's verdict says so.
  for (const auto& p : b["probes"]) {
    if (!p["run"].is_string()) continue;
    const json run = s.get(pto::api_path::run(p["run"]));
    INFO(run.dump(1));
    REQUIRE(run["jobs"][0]["steps"][0]["perf"]["verdict"].is_string());
    const std::string verdict = run["jobs"][0]["steps"][0]["perf"]["verdict"];
    CHECK(verdict.find(" against " + shas[0].substr(0, 12)) != std::string::npos);
    CHECK(verdict.find(" on card ") != std::string::npos);
  }
  // Without --job, a metric no step measures is refused here, naming the ones that are.
  CommandResult unknown = run_cli({"--root", repo.path(), "bisect", "--server", s.url(), "--metric", "prefill", "--good", shas[0], "--bad", shas[30]},
                                  {{"PTO_RUNNER_TOKEN", s.token}});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("--metric prefill: no step of the definitions at " + repo.path() + " measures it (their metrics: decode)") != std::string::npos);
}

TEST_CASE("perf: the history keeps a branch's rows and lets a pull request's go with its run", "[perf]") {
  TempDir d;
  const std::string db = (d.path() / "journal.db").string();
  sqlite3* raw = nullptr;  // the journal's table of runs, as store/journal makes it: one run kept
  REQUIRE(sqlite3_open(db.c_str(), &raw) == SQLITE_OK);
  REQUIRE(sqlite3_exec(raw, "CREATE TABLE runs(id TEXT PRIMARY KEY); INSERT INTO runs VALUES('kept');", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(raw);
  std::string error;
  auto h = pto::PerfHistory::open(db, error);
  REQUIRE(h);
  auto row = [](const std::string& ref, const std::string& run, double at) {
    pto::PerfRecord r;
    r.metric = "decode", r.ref = ref, r.run = run, r.step = "1-1", r.at = at, r.samples = {1000, 1010}, r.median = 1005;
    return r;
  };
  REQUIRE(h->record(row("refs/heads/main", "gone-main", 1)));
  REQUIRE(h->record(row("refs/pull/1/merge", "gone-pr", 2)));
  REQUIRE(h->record(row("refs/pull/2/merge", "kept", 3)));
  REQUIRE(h->prune());
  CHECK(h->series("decode", "refs/heads/main", "", 10).size() == 1);  // a branch's history stays
  CHECK(h->series("decode", "refs/pull/1/merge", "", 10).empty());   // its run is gone: so is the row
  CHECK(h->series("decode", "refs/pull/2/merge", "", 10).size() == 1);
  CHECK(h->series("decode", "refs/heads/main", "", 10)[0].samples == std::vector<double>{1000, 1010});
}
