// The shipped Prometheus alerting rules (packaging/alerts/, issue 35): checked and unit-tested by promtool, each
// alert both firing and silent in its tests, and the real Prometheus and Alertmanager (Debian's prometheus and
// prometheus-alertmanager) scraping a real daemon until Alertmanager's webhook reaches a local receiver.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "served_daemon.h"
#include "test_support.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

fs::path alerts_dir() { return source_dir() / "packaging" / "alerts"; }

}  // namespace

TEST_CASE("alerts: the shipped rules pass promtool check rules and promtool test rules, and every alert fires in a test and "
          "stays silent in another", "[alerts]") {
  if (!have("promtool")) FAIL("promtool is not installed (Debian's prometheus; scripts/install-deps.sh installs it)");
  std::string out;
  INFO(out);
  REQUIRE(sh("cd " + alerts_dir().string() + " && promtool check rules pto-runner.rules.yml 2>&1", &out) == 0);
  CHECK(out.find("SUCCESS: 10 rules found") != std::string::npos);
  REQUIRE(sh("cd " + alerts_dir().string() + " && promtool test rules pto-runner.rules.test.yml 2>&1", &out) == 0);
  // Each alert of the rules: a summary, a description, a runbook link into the docs, and tests both ways.
  const YAML::Node rules = YAML::LoadFile((alerts_dir() / "pto-runner.rules.yml").string());
  const YAML::Node tests = YAML::LoadFile((alerts_dir() / "pto-runner.rules.test.yml").string());
  std::map<std::string, std::pair<int, int>> fired_silent;
  for (const auto& t : tests["tests"])
    for (const auto& a : t["alert_rule_test"]) {
      auto& fs = fired_silent[a["alertname"].as<std::string>()];
      (a["exp_alerts"].size() > 0 ? fs.first : fs.second)++;
    }
  const std::string on_call = read_file(source_dir() / "docs" / "on-call.md");
  int alerts = 0;
  for (const auto& rule : rules["groups"][0]["rules"]) {
    const std::string name = rule["alert"].as<std::string>();
    ++alerts;
    INFO(name);
    CHECK(!rule["annotations"]["summary"].as<std::string>().empty());
    CHECK(rule["annotations"]["description"].as<std::string>().size() > 80);
    std::string anchor = name;
    std::transform(anchor.begin(), anchor.end(), anchor.begin(), ::tolower);
    CHECK(rule["annotations"]["runbook_url"].as<std::string>().find("/on-call/#" + anchor) != std::string::npos);
    CHECK(on_call.find("### " + name) != std::string::npos);  // the runbook's section (mkdocs makes its anchor)
    CHECK(fired_silent[name].first > 0);
    CHECK(fired_silent[name].second > 0);
  }
  CHECK(alerts == 10);
}

TEST_CASE("alerts: the real Prometheus and Alertmanager scraping a daemon: a card turned bad by failures reaches Alertmanager's "
          "webhook as PtoRunnerCardBad, and the alert resolves once the card is back", "[alerts][daemon]") {
  for (const char* tool : {"prometheus", "prometheus-alertmanager"})
    if (!have(tool)) FAIL(std::string(tool) + " is not installed (scripts/install-deps.sh installs it)");
  TempDir work;
  // The receiver Alertmanager posts to (its webhook_config), a plain local HTTP server.
  Background receiver = start_background({"/usr/bin/python3", (source_dir() / "tests/fixtures/notify_receiver.py").string(), "--port-file",
                                          (work.path() / "receiver.port").string(), "--log", (work.path() / "alerts.jsonl").string()},
                                         work.path() / "receiver.log");
  REQUIRE(wait_until([&] { return fs::exists(work.path() / "receiver.port"); }, 20));
  const std::string receiver_port = read_file(work.path() / "receiver.port");

  Served s;
  s.devices = "0-3";
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  std::ofstream(marks / "wedged-0") << "1";
  s.dir.write("runner.yml", "sandbox: off\nhealth:\n  fault-patterns: [{pattern: '507018', cause: card}]\n  max-auto-drained: 1\n"
                            "  check: 'test ! -e " + marks.string() + "/wedged-{device}'\n  return-after: 1\n  probe-interval-seconds: 0.2\n");
  write_project(s.dir, {{"w.yml", "name: w\nsteps:\n  - {name: s, devices: 1, retry: {max: 0}, run: 'if [ -e " + marks.string() +
                                      "/wedged-$TASK_DEVICE ]; then echo 507018; exit 1; fi'}\n"}});
  s.start();

  // Alertmanager as the docs show it (docs/operators.md, "Alerts"), one node, its webhook to the receiver.
  const int am_port = free_tcp_port();
  std::ofstream(work.path() / "alertmanager.yml") << "route:\n  receiver: oncall\n  group_by: [alertname, card]\n  group_wait: 1s\n"
                                                      "  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: oncall\n"
                                                      "    webhook_configs:\n      - url: http://127.0.0.1:" + receiver_port +
                                                      "/alertmanager\n        send_resolved: true\n";
  Background am = start_background({"/usr/bin/prometheus-alertmanager", "--config.file=" + (work.path() / "alertmanager.yml").string(),
                                    "--storage.path=" + (work.path() / "am-data").string(),
                                    "--web.listen-address=127.0.0.1:" + std::to_string(am_port), "--cluster.listen-address="},
                                   work.path() / "alertmanager.log");
  // The shipped rules, each `for:` cut to nothing so the test need not wait minutes: the expressions are the
  // shipped ones.
  std::string rules = read_file(alerts_dir() / "pto-runner.rules.yml");
  rules = std::regex_replace(rules, std::regex("for: [0-9]+[smh]"), "for: 0s");
  std::ofstream(work.path() / "rules.yml") << rules;
  const int prom_port = free_tcp_port();
  std::ofstream(work.path() / "prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yml]\n"
                                                    "alerting:\n  alertmanagers:\n    - static_configs: [{targets: ['127.0.0.1:" +
                                                        std::to_string(am_port) + "']}]\n"
                                                    "scrape_configs:\n  - job_name: pto-runner\n    static_configs: [{targets: ['127.0.0.1:" +
                                                        std::to_string(s.port) + "']}]\n";
  Background prom = start_background({"/usr/bin/prometheus", "--config.file=" + (work.path() / "prometheus.yml").string(),
                                      "--storage.tsdb.path=" + (work.path() / "prom-data").string(),
                                      "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
                                     work.path() / "prometheus.log");

  auto card_bad_alerts = [&](const std::string& status) {
    int n = 0;
    std::istringstream in(read_file(work.path() / "alerts.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const json entry = json::parse(line, nullptr, false);
      if (!entry.is_object()) continue;  // empty, or the receiver's line half written as we read
      const json body = entry.value("body", json::object());
      for (const auto& a : body["alerts"])
        n += a["labels"]["alertname"] == "PtoRunnerCardBad" && a["labels"]["card"] == "0" && a["status"] == status &&
             a["labels"]["job"] == "pto-runner";
    }
    return n;
  };
  // Two runs fail on card 0: it is bad, drained; Prometheus sees it in /metrics, fires, Alertmanager posts.
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  INFO(read_file(work.path() / "prometheus.log").substr(0, 3000) << read_file(work.path() / "alertmanager.log").substr(0, 3000));
  REQUIRE(wait_until([&] { return card_bad_alerts("firing") > 0; }, 60));
  // The wedge removed: probed back to good, the alert resolves and Alertmanager says so.
  fs::remove(marks / "wedged-0");
  REQUIRE(wait_until([&] { return s.get(pto::api_path::kStatus)["devices"][0]["health"]["state"] == "good"; }, 20));
  REQUIRE(wait_until([&] { return card_bad_alerts("resolved") > 0; }, 60));
}
