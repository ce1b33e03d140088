// The queue across runs with a real daemon (issue 23): priorities by ref, fair share between runs, superseded
// runs of one pull request, and an expected start for every queued step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <map>
#include <thread>

#include <signal.h>

#include "served_daemon.h"
#include "test_support.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

/// `n` one-card steps of `run`, each its own (identical steps would be run once: deduplicated).
std::string steps_job(const std::string& name, int n, const std::string& run) {
  std::string y = "name: " + name + "\nparallel: true\nsteps:\n";
  for (int i = 0; i < n; ++i)
    y += "  - {name: s" + std::to_string(i) + ", devices: 1, run: '" + run + "; : " + name + std::to_string(i) + "'}\n";
  return y;
}

/// Seconds since the epoch of an ISO time with milliseconds ("2026-12-01T22:10:03.123Z").
double epoch_of(const json& iso) {
  std::tm tm{};
  const std::string s = iso.get<std::string>();
  strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  return static_cast<double>(timegm(&tm)) + std::stod(s.substr(19, 4));
}

struct StepTimes {
  double runnable, started, finished;
};
std::vector<StepTimes> times_of(const json& run) {
  std::vector<StepTimes> out;
  for (const auto& j : run["jobs"])
    for (const auto& s : j["steps"])
      if (!s["started"].is_null() && !s["finished"].is_null())
        out.push_back({epoch_of(s["runnable"]), epoch_of(s["started"]), epoch_of(s["finished"])});
  return out;
}

}  // namespace

TEST_CASE("queue: on 8 cards a 4-step run submitted 1 s after a 200-step run ends before the big one used a quarter of its card-time, a main run submitted last starts next, every queued step has an eta",
          "[queue]") {
  Served s;
  s.devices = "0-7";
  write_project(s.dir, {{"big.yml", steps_job("big", 200, "sleep 0.5")},
                        {"small.yml", steps_job("small", 4, "sleep 0.5")},
                        {"mainline.yml", steps_job("mainline", 2, "sleep 0.5")}});
  s.start();
  const std::string big = s.submit_run({{"jobs", {"big"}}, {"ref", "refs/pull/1/merge"}});
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::string small = s.submit_run({{"jobs", {"small"}}, {"ref", "refs/pull/2/merge"}});
  const std::string main_run = s.submit_run({{"jobs", {"mainline"}}, {"ref", "refs/heads/main"}});

  // While the big run waits: every queued step has an expected start, and its place explained.
  json st;
  REQUIRE(wait_until([&] {
    st = s.get(std::string(api_path::kStatus) + "?queue=all");
    return st["queue"].size() > 20 && !st["queue"][0]["eta"].is_null();
  }, 20));
  std::string places;  // said if a check fails: every place, its step, expected start and fair-share tag
  for (const auto& q : st["queue"])
    places += q.value("step", "") + " eta " + q["eta_seconds"].dump() + " tag " + q["why"].value("fair_share_tag", json()).dump() + "\n";
  INFO(places);
  // A place is the order now; the forecast plays fair share forward, so by the time cards free the big run has
  // used more and another run's later place may start first (seen when main's both steps were still queued).
  // Within one run of steps asking the same (one card each, here), later places start no sooner.
  double last_eta = 0;
  std::map<std::string, double> last_eta_of_run;
  for (const auto& q : st["queue"]) {
    REQUIRE(q["eta"].is_string());
    REQUIRE(q["eta_seconds"].is_number());
    double& run_last = last_eta_of_run[q.value("run", "")];
    CHECK(q["eta_seconds"].get<double>() + 1e-3 >= run_last);
    run_last = q["eta_seconds"].get<double>();
    last_eta = std::max(last_eta, q["eta_seconds"].get<double>());
    REQUIRE(q["why"].is_object());
    if (q.value("run", "") == main_run) {
      CHECK(q["why"]["priority"] == 10);
      CHECK(q["why"]["priority_rule"] == "refs/heads/main");
    } else {
      CHECK(q["why"]["priority"] == 0);
    }
  }
  // The last of 200 half-second steps on 8 cards starts no sooner than ~12 s from the big run's start.
  CHECK(last_eta > 5);
  // The status for a person shows the same expected starts.
  CommandResult text = run_cli({"status", "--server", s.url()});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find(", expected start in ~") != std::string::npos);

  json big_run = s.wait_run(big, 120), small_run = s.wait_run(small, 60), main_json = s.wait_run(main_run, 60);
  REQUIRE(big_run["state"] == "succeeded");
  REQUIRE(small_run["state"] == "succeeded");
  REQUIRE(main_json["state"] == "succeeded");
  const auto big_steps = times_of(big_run), small_steps = times_of(small_run), main_steps = times_of(main_json);
  REQUIRE(big_steps.size() == 200);
  double small_end = 0, big_total = 0, big_by_then = 0;
  for (const auto& t : small_steps) small_end = std::max(small_end, t.finished);
  for (const auto& t : big_steps) {
    big_total += t.finished - t.started;
    if (t.started < small_end) big_by_then += std::min(t.finished, small_end) - t.started;
  }
  INFO("big run's card-time before the small run ended: " << big_by_then << " of " << big_total);
  CHECK(big_by_then < big_total / 4);
  // Main's first step: no step of another run started between its being queued and its start.
  auto first_main = *std::min_element(main_steps.begin(), main_steps.end(), [](auto a, auto b) { return a.started < b.started; });
  int overtook = 0;
  std::string overtakers;  // said if this fails: which start, against main's queued and started times
  for (const auto* steps : {&big_steps, &small_steps})
    for (const auto& t : *steps)
      if (t.started > first_main.runnable + 0.02 && t.started < first_main.started - 0.02) {
        ++overtook;
        overtakers += std::to_string(t.started - first_main.runnable) + " s after main's runnable; ";
      }
  INFO("main queued at +0, started at +" << first_main.started - first_main.runnable << " s; overtaken by: " << overtakers);
  CHECK(overtook == 0);
  CHECK(main_json["request"]["priority"]["value"] == 10);
  CHECK(big_run["request"]["pull_request"] == "#1");
}

TEST_CASE("queue: a new run of the same pull request cancels the older one's waiting and running steps and names it, and a main run is never superseded",
          "[queue]") {
  Served s;
  s.devices = "0-1";
  write_project(s.dir, {{"slow.yml", steps_job("slow", 3, "sleep 1000")}});
  s.start();
  const json pr = {{"jobs", {"slow"}}, {"ref", "refs/pull/7/merge"}, {"github", {{"repository", "hw-native-sys/pypto"}}}};
  const std::string first = s.submit_run(pr);
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["queue"].size() == 1; }, 20));  // 2 running, 1 waiting
  const std::string second = s.submit_run(pr);
  json old = s.wait_run(first, 30);
  CHECK(old["state"] == "cancelled");
  CHECK(old["superseded_by"] == second);
  CHECK(old["cancel_reason"].get<std::string>().find("superseded by run " + second) != std::string::npos);
  int cancelled = 0, ran = 0;
  for (const auto& st : old["jobs"][0]["steps"]) {
    cancelled += st["state"] == "cancelled";
    ran += !st["started"].is_null();
  }
  CHECK(cancelled == 3);  // the two that ran and the one that waited
  CHECK(ran == 2);
  // The newer run goes on; another pull request's run does not touch it.
  const std::string other_pr = s.submit_run({{"jobs", {"slow"}}, {"ref", "refs/pull/8/merge"}, {"github", {{"repository", "hw-native-sys/pypto"}}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(s.get(api_path::run(second))["state"] == "running");
  // Two runs of main: both stay.
  const json main_body = {{"jobs", {"slow"}}, {"ref", "refs/heads/main"}, {"github", {{"repository", "hw-native-sys/pypto"}}}};
  const std::string main1 = s.submit_run(main_body), main2 = s.submit_run(main_body);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(s.get(api_path::run(main1))["state"] == "running");
  CHECK(s.get(api_path::run(main1)).value("superseded_by", "") == "");
  for (const auto& id : {second, other_pr, main1, main2}) CHECK(s.post(api_path::run_cancel(id), json::object()).status == 202);
}

TEST_CASE("queue: supersede: off keeps both runs of one pull request, SIGHUP applies priorities and supersede to new runs, and a bad priorities entry names its field", "[queue]") {
  Served s;
  s.devices = "0-1";
  write_project(s.dir, {{"slow.yml", steps_job("slow", 1, "sleep 1000")}});
  std::ofstream(s.dir.path() / "runner.yml") << "supersede: off\npriorities:\n  - {ref: 'refs/heads/release/*', priority: 5}\n";
  s.start();
  const json pr = {{"jobs", {"slow"}}, {"ref", "refs/pull/7/head"}};
  const std::string a = s.submit_run(pr), b = s.submit_run(pr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(s.get(api_path::run(a))["state"] == "running");
  const std::string rel = s.submit_run({{"jobs", {"slow"}}, {"ref", "refs/heads/release/1.2"}});
  CHECK(s.get(api_path::run(rel))["request"]["priority"]["value"] == 5);
  // The file's list replaces the defaults: main is no longer above pull requests.
  const std::string m = s.submit_run({{"jobs", {"slow"}}, {"ref", "refs/heads/main"}});
  CHECK(s.get(api_path::run(m))["request"]["priority"]["value"] == 0);
  for (const auto& id : {a, b, rel, m}) s.post(api_path::run_cancel(id), json::object());

  // SIGHUP: both apply to runs submitted from then on, and the log says so.
  std::ofstream(s.dir.path() / "runner.yml") << "supersede: pull-request\n";
  ::kill(s.proc.pid, SIGHUP);
  REQUIRE(wait_until([&] { return read_file(s.proc.err).find("supersede pull-request (runs submitted from now on)") != std::string::npos; }, 10));
  CHECK(read_file(s.proc.err).find("priorities refs/heads/main=10") != std::string::npos);
  const std::string c = s.submit_run(pr), d = s.submit_run(pr);
  CHECK(s.wait_run(c)["superseded_by"] == d);
  const std::string m2 = s.submit_run({{"jobs", {"slow"}}, {"ref", "refs/heads/main"}});
  CHECK(s.get(api_path::run(m2))["request"]["priority"]["value"] == 10);
  for (const auto& id : {d, m2}) s.post(api_path::run_cancel(id), json::object());

  TempDir bad;
  write_project(bad, {{"slow.yml", steps_job("slow", 1, "true")}});
  std::ofstream(bad.path() / "runner.yml") << "priorities:\n  - {ref: refs/heads/main}\n  - {ref: x, priority: high}\nsupersede: sometimes\n";
  auto r = run_cli({"lint", "--root", bad.str()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);  // input errors
  const std::string all = r.out + r.err;
  CHECK(all.find("runner.yml:2:5") != std::string::npos);   // the entry without a priority
  CHECK(all.find("runner.yml:3:24") != std::string::npos);  // "high"
  CHECK(all.find("'supersede' is pull-request or off") != std::string::npos);
}

TEST_CASE("queue: submit says where its run's next step is in the queue and when it is expected to start, and the summary what it waited against that",
          "[queue]") {
  Served s;
  s.devices = "1";
  const std::string go = (s.dir.path() / "go").string();
  write_project(s.dir, {{"hold.yml", "name: hold\nsteps:\n  - {name: h, devices: 1, expected-minutes: 2, run: 'while [ ! -e " + go +
                                         " ]; do sleep 0.05; done'}\n"},
                        {"next.yml", "name: next\nsteps:\n  - {name: n, devices: 1, expected-minutes: 1, run: 'true'}\n"}});
  s.start();
  const std::string holder = s.submit_run({{"jobs", {"hold"}}});
  REQUIRE(wait_until([&] { return s.get(api_path::kStatus)["devices"][0]["holder"].is_object(); }, 20));
  const fs::path summary = s.dir.path() / "summary.md";
  Spawned c = spawn_cli({"submit", "--server", s.url(), "--job", "next", "--wait", "--poll-interval", "0.1"},
                        {{"PTO_RUNNER_TOKEN", s.token}, {"GITHUB_ACTIONS", "true"}, {"GITHUB_STEP_SUMMARY", summary.string()}});
  // The held card frees at its holder's estimate (2 min after it started): the next step's expected start.
  const bool said = wait_until([&] { return read_file(c.out).find("... waiting: next / n is #1 of 1 in the queue, expected start in ~") != std::string::npos; }, 20);
  INFO(read_file(c.out) << read_file(c.err));
  REQUIRE(said);
  const std::string line = read_file(c.out).substr(read_file(c.out).find("expected start in ~") + 19);
  INFO(line);
  CHECK((line.rfind("1m", 0) == 0 || line.rfind("2m", 0) == 0));  // ~1m5xs: 2 minutes less the seconds it ran
  std::ofstream(go) << "1";
  CommandResult done = wait_cli(c);
  INFO(done.out << done.err);
  CHECK(done.exit_code == 0);
  const std::string md = read_file(summary);
  INFO(md);
  CHECK(md.find("| next | n | succeeded | ") != std::string::npos);
  CHECK(md.find("(expected 1m") != std::string::npos);
  CHECK(s.wait_run(holder)["state"] == "succeeded");
}
