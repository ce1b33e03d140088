// On-call hears it first (issue 35): notifications to Feishu, Slack and webhooks (notify/), from a real daemon
// to local HTTP servers standing in for them (tests/fixtures/notify_receiver.py, Python's http.server; the
// internet is out of reach here). Feishu's signature is checked by the receiver with Python's hmac, apart from
// pto-runner's OpenSSL code.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "config/runner_config.h"
#include "notify/notify_message.h"
#include "served_daemon.h"
#include "test_support.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

/// A local receiver: every POST it took, parsed (tests/fixtures/notify_receiver.py).
struct Receiver {
  TempDir dir;
  Background proc;
  int port = 0;
  explicit Receiver(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {"/usr/bin/python3", (source_dir() / "tests/fixtures/notify_receiver.py").string(), "--port-file",
                                     (dir.path() / "port").string(), "--log", (dir.path() / "log.jsonl").string(), "--down",
                                     (dir.path() / "down").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc = start_background(argv, dir.path() / "stderr");
    REQUIRE(wait_until([&] { return fs::exists(dir.path() / "port"); }, 20));
    port = std::stoi(read_file(dir.path() / "port"));
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
  void down(bool is_down) const {
    if (is_down) std::ofstream(dir.path() / "down") << "1";
    else fs::remove(dir.path() / "down");
  }
  std::vector<json> requests() const {
    std::vector<json> out;
    std::istringstream in(read_file(dir.path() / "log.jsonl"));
    for (std::string line; std::getline(in, line);) {
      json entry = json::parse(line, nullptr, false);
      if (entry.is_object()) out.push_back(std::move(entry));  // not empty, nor half written as we read
    }
    return out;
  }
};

fs::path write_secret(const TempDir& d, const std::string& name, const std::string& value) {
  const fs::path p = d.path() / name;
  std::ofstream(p) << value << "\n";
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
  return p;
}

std::string text_of(const json& feishu) { return feishu["body"]["content"]["text"].get<std::string>(); }

}  // namespace

TEST_CASE("notify: Feishu's signature is base64 HMAC-SHA256 keyed by timestamp, newline, secret over nothing, a webhook's body "
          "is signed with its secret, each kind's message has its documented shape", "[notify]") {
  // Computed with Python's hmac: base64.b64encode(hmac.new(b"1700000000\nSEC-test-secret", b"", hashlib.sha256).digest())
  CHECK(pto::feishu_sign(1700000000, "SEC-test-secret") == "N/YfEei+5/EskDDCjSL3nvdh2x/Igb36CEA5Cc6MdHk=");
  // hmac.new(b"hook-secret", b'{"a":1}', hashlib.sha256).hexdigest()
  CHECK(pto::webhook_signature("hook-secret", "{\"a\":1}") == "sha256=eb8ded9d103e519ca7e2ab1be0df069c649c61531b59a9dcbf2fa2e799fb1fa6");

  pto::OutboxEntry a, b;
  a.id = 7, b.id = 8;
  a.event.kind = b.event.kind = "main-red";
  a.event.group = b.event.group = "main-red:run:R";
  a.event.title = "main is red: st / one failed (code)";
  a.event.lines = {"FAILED t.py::test_x [failed, code]: assert 1 == 2"};
  b.event.title = "main is red: st / two failed (card)";
  a.event.at = b.event.at = 1700000000;
  a.event.details = {{"run", "R"}};
  pto::NotifyReceiver feishu{"f", pto::NotifyChannel::Feishu, "https://open.feishu.cn/open-apis/bot/v2/hook/T", "/s"};
  auto m = pto::render_message(feishu, {a, b}, "SEC-test-secret", 1700000000, false, "npu-host-1");
  json j = json::parse(m.body);
  CHECK(j["timestamp"] == "1700000000");
  CHECK(j["sign"] == "N/YfEei+5/EskDDCjSL3nvdh2x/Igb36CEA5Cc6MdHk=");
  CHECK(j["msg_type"] == "text");
  const std::string text = j["content"]["text"];
  CHECK(text.rfind("pto-runner on npu-host-1: main is red: st / one failed (code) (and 1 more)", 0) == 0);
  CHECK(text.find("FAILED t.py::test_x") != std::string::npos);
  CHECK(text.find("two failed") != std::string::npos);

  pto::NotifyReceiver slack{"s", pto::NotifyChannel::Slack, "https://hooks.slack.com/services/X"};
  j = json::parse(pto::render_message(slack, {a}, "", 1700000000, true, "npu-host-1").body);
  CHECK(j["blocks"][0]["type"] == "header");
  CHECK(j["blocks"][0]["text"]["text"] == "[possibly repeated] main is red: st / one failed (code)");
  CHECK(j["blocks"][1]["text"]["type"] == "mrkdwn");
  CHECK(j["text"].get<std::string>().find("main is red") != std::string::npos);

  pto::NotifyReceiver hook{"h", pto::NotifyChannel::Webhook, "http://127.0.0.1:1/hook", "/s"};
  m = pto::render_message(hook, {a, b}, "hook-secret", 1700000000, false, "npu-host-1");
  j = json::parse(m.body);
  CHECK(j["version"] == 1);
  CHECK(j["receiver"] == "h");
  CHECK(j["possible_duplicate"] == false);
  REQUIRE(j["events"].size() == 2);
  CHECK(j["events"][0]["id"] == 7);
  CHECK(j["events"][0]["kind"] == "main-red");
  CHECK(j["events"][0]["at"] == "2023-11-14T22:13:20.000Z");
  CHECK(j["events"][0]["details"]["run"] == "R");
  CHECK(std::count(m.headers.begin(), m.headers.end(), "X-Pto-Runner-Signature-256: " + pto::webhook_signature("hook-secret", m.body)) == 1);
  CHECK(pto::shown_url("https://open.feishu.cn/open-apis/bot/v2/hook/TOKEN") == "https://open.feishu.cn/...");
  CHECK(pto::shown_url("https://user:pw@example.com/x") == "https://example.com/...");
}

TEST_CASE("notify: runner.yml's receivers are checked where they are written, and doctor checks each secret file", "[notify]") {
  TempDir d;
  write_project(d, {{"a.yml", "name: a\nsteps:\n  - {name: s, run: 'true'}\n"}});
  d.write("runner.yml", "sandbox: off\nnotify:\n"
                        "  - {name: a, kind: feishu, url: 'https://x/hook'}\n"
                        "  - {name: b, kind: teams, url: 'https://x/hook'}\n"
                        "  - {name: c, kind: slack, url: 'ftp://x', events: [card-bad, card-on-fire]}\n"
                        "  - {name: c, kind: webhook, url: 'https://x'}\n");
  auto r = run_cli({"lint", "--root", d.str()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("runner.yml:3:5: error: notify: a feishu receiver needs 'secret-file'") != std::string::npos);
  CHECK(r.out.find("runner.yml:4:21: error: notify: 'kind' is feishu, slack or webhook, got 'teams'") != std::string::npos);
  CHECK(r.out.find("runner.yml:5:33: error: notify: 'url' is an http(s) URL, got 'ftp://x'") != std::string::npos);
  CHECK(r.out.find("notify: no event 'card-on-fire' (events: card-bad, card-retired, card-returned, main-red, ran-no-tests, "
                   "new-flaky-test, queue-stuck, bisect-done)") != std::string::npos);
  CHECK(r.out.find("runner.yml:6:12: error: notify: two receivers are named 'c'") != std::string::npos);

  const fs::path open_secret = d.path() / "open.secret";
  std::ofstream(open_secret) << "s3cret\n";
  fs::permissions(open_secret, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  write_secret(d, "good.secret", "s3cret");
  d.write("runner.yml", "sandbox: off\nnotify:\n"
                        "  - {name: open, kind: feishu, url: 'https://x/hook', secret-file: open.secret}\n"
                        "  - {name: good, kind: webhook, url: 'https://x/hook', secret-file: good.secret}\n"
                        "  - {name: gone, kind: feishu, url: 'https://x/hook', secret-file: gone.secret}\n");
  r = run_cli({"doctor", "--root", d.str()});
  INFO(r.out);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("can be read by other users (mode 0604)") != std::string::npos);
  CHECK(r.out.find("chmod 0600 " + open_secret.string()) != std::string::npos);
  CHECK(r.out.find("good.secret: readable by its owner only") != std::string::npos);
  CHECK(r.out.find("gone.secret does not exist") != std::string::npos);
  CHECK(r.out.find("s3cret") == std::string::npos);  // never the secret itself
}

TEST_CASE("notify: a card turned bad by failures reaches Feishu signed, Slack as blocks and a webhook as its documented body, "
          "its return reaches those that asked, URLs' tokens and secrets stay out of the status and the log", "[notify][daemon]") {
  Receiver feishu({"--feishu-secret", "SEC-feishu-1"}), slack, hook({"--webhook-secret", "hook-secret-2"});
  Served s;
  s.devices = "0-3";
  const fs::path marks = s.dir.path() / "marks";
  fs::create_directories(marks);
  std::ofstream(marks / "wedged-0") << "1";
  const fs::path feishu_secret = write_secret(s.dir, "feishu.secret", "SEC-feishu-1");
  const fs::path hook_secret = write_secret(s.dir, "hook.secret", "hook-secret-2");
  s.dir.write("runner.yml", "sandbox: off\nhealth:\n  fault-patterns: [{pattern: '507018', cause: card}]\n  max-auto-drained: 1\n"
                            "  check: 'test ! -e " + marks.string() + "/wedged-{device}'\n  return-after: 1\n  probe-interval-seconds: 0.2\n"
                            "notify:\n  group-seconds: 0.2\n  retry-max-seconds: 1\n  receivers:\n"
                            "    - {name: oncall-feishu, kind: feishu, url: '" + feishu.url("/open-apis/bot/v2/hook/TOKEN-abc123") +
                            "', secret-file: " + feishu_secret.string() + "}\n"
                            "    - {name: oncall-slack, kind: slack, url: '" + slack.url("/services/T0/B0/SLACKTOKEN") + "', events: [card-bad]}\n"
                            "    - {name: hook, kind: webhook, url: '" + hook.url("/hook") + "', secret-file: " + hook_secret.string() + "}\n");
  write_project(s.dir, {{"w.yml", "name: w\nsteps:\n  - {name: s, devices: 1, retry: {max: 0}, run: 'if [ -e " + marks.string() +
                                      "/wedged-$TASK_DEVICE ]; then echo 507018; exit 1; fi'}\n"}});
  s.start();
  // Two runs fail on card 0 (the lowest free): charged from two runs, it is bad.
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  s.wait_run(s.submit_run({{"jobs", {"w"}}}));
  REQUIRE(wait_until([&] { return !feishu.requests().empty() && !slack.requests().empty() && !hook.requests().empty(); }, 20));
  const json f = feishu.requests().front();
  INFO(f.dump());
  CHECK(f["path"] == "/open-apis/bot/v2/hook/TOKEN-abc123");
  CHECK(f["sign_ok"] == true);  // Python's hmac agrees with the signature
  CHECK(std::abs(std::stoll(f["body"]["timestamp"].get<std::string>()) - std::time(nullptr)) < 120);
  CHECK(text_of(f).find("card 0 is bad: drained") != std::string::npos);
  CHECK(text_of(f).find("507018") != std::string::npos);
  const json sl = slack.requests().front()["body"];
  CHECK(sl["blocks"][0]["type"] == "header");
  CHECK(sl["blocks"][0]["text"]["text"].get<std::string>().find("card 0 is bad") != std::string::npos);
  const json h = hook.requests().front();
  CHECK(h["sig_ok"] == true);
  CHECK(h["body"]["version"] == 1);
  CHECK(h["body"]["receiver"] == "hook");
  REQUIRE(h["body"]["events"].size() == 1);
  CHECK(h["body"]["events"][0]["kind"] == "card-bad");
  CHECK(h["body"]["events"][0]["group"] == "card:0");
  CHECK(h["body"]["events"][0]["details"]["card"] == 0);
  CHECK(h["body"]["events"][0]["details"]["to"] == "bad");
  CHECK(h["body"]["events"][0]["link"].get<std::string>().find("/cards") != std::string::npos);

  // The wedge removed, the card passes its check and is back: Feishu and the webhook hear it, Slack asked only
  // for card-bad.
  fs::remove(marks / "wedged-0");
  REQUIRE(wait_until([&] { return feishu.requests().size() >= 2 && hook.requests().size() >= 2; }, 20));
  CHECK(text_of(feishu.requests()[1]).find("card 0 is back in service (was ") != std::string::npos);
  CHECK(hook.requests()[1]["body"]["events"][0]["kind"] == "card-returned");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(slack.requests().size() == 1);

  const json st = s.get(pto::api_path::kStatus);
  REQUIRE(st["notify"].size() == 3);
  CHECK(st["notify"][0]["name"] == "oncall-feishu");
  CHECK(st["notify"][0]["url"] == "http://127.0.0.1:" + std::to_string(feishu.port) + "/...");
  CHECK(st["notify"][0]["failing"] == false);
  CHECK(st["notify"][0]["delivered"] == 2);
  const std::string said = st.dump() + read_file(s.proc.out) + read_file(s.proc.err) +
                           pto::api_request("GET", s.url("/metrics")).body;
  CHECK(said.find("TOKEN-abc123") == std::string::npos);
  CHECK(said.find("SLACKTOKEN") == std::string::npos);
  CHECK(said.find("SEC-feishu-1") == std::string::npos);
  CHECK(said.find("pto_runner_notify_delivered_total{receiver=\"oncall-slack\"} 1") != std::string::npos);
}

TEST_CASE("notify: a red run on main is one message for all its red steps, 32 victims of one card in one step are one line of it, "
          "and a step that ran no tests is said and counted for the alerts", "[notify][daemon]") {
  if (!have_pytest()) FAIL("python3-pytest is not installed (scripts/install-deps.sh installs it)");
  Receiver hook;
  Served s;
  s.devices = "0-3";
  // 33 tests on one card: the first finds it broken (507018), the 32 after it fail behind it.
  fs::create_directories(s.dir.path() / "suite");
  std::ofstream(s.dir.path() / "suite" / "test_card.py") << "import pytest\n\n"
                                                             "@pytest.mark.parametrize('n', range(33))\n"
                                                             "def test_kernel(n):\n"
                                                             "    if n == 0:\n"
                                                             "        print('aclrtSynchronizeStream failed: 507018')\n"
                                                             "    raise RuntimeError('the device stream failed')\n";
  fs::create_directories(s.dir.path() / "empty");
  s.dir.write("runner.yml", "sandbox: off\nhealth:\n  fault-patterns: [{pattern: '507018', cause: card}]\n"
                            "notify:\n  group-seconds: 5\n  receivers:\n    - {name: hook, kind: webhook, url: '" + hook.url("/hook") +
                            "', refs: [refs/heads/main]}\n");
  write_project(s.dir, {{"st.yml", std::string("name: st\nparallel: true\nsteps:\n"
                                               "  - {name: system tests, devices: 1, tests: pytest, retry: {max: 0}, run: '") + kPytest + " suite'}\n"
                                               "  - {name: plain, run: 'exit 3'}\n"
                                               "  - {name: none, tests: pytest, retry: {max: 0}, run: '" + kPytest + " empty'}\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"st"}}, {"ref", "refs/heads/main"}, {"sha", "0123456789abcdef0123456789abcdef01234567"}});
  const json run = s.wait_run(id, 120);
  REQUIRE(run["state"] == "failed");
  REQUIRE(wait_until([&] { return hook.requests().size() >= 2; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // nothing more comes
  const std::vector<json> got = hook.requests();
  INFO(json(got).dump(1).substr(0, 6000));
  REQUIRE(got.size() == 2);
  json red, none;
  for (const json& r : got) (r["body"]["events"][0]["kind"] == "main-red" ? red : none) = r["body"];
  INFO(red.dump(1));
  REQUIRE(red["events"].size() == 3);  // the three red steps of the run: one message
  std::set<std::string> steps;
  std::string victims_line;
  for (const json& e : red["events"]) {
    CHECK(e["group"] == "main-red:run:" + id);
    CHECK(e["ref"] == "refs/heads/main");
    steps.insert(e["details"]["step"].get<std::string>());
    for (const auto& l : e["lines"])
      if (l.get<std::string>().find("32 victims") != std::string::npos) victims_line = l;
  }
  CHECK(steps == std::set<std::string>{"st / system tests", "st / plain", "st / none"});
  CHECK(victims_line.find("32 victims of suite/test_card.py::test_kernel[0] on card") != std::string::npos);
  CHECK(red["title"].get<std::string>().rfind("main is red: ", 0) == 0);
  CHECK(red["title"].get<std::string>().find("(and 2 more)") != std::string::npos);
  REQUIRE(none["events"].size() == 1);
  CHECK(none["events"][0]["kind"] == "ran-no-tests");
  CHECK(none["events"][0]["title"].get<std::string>().find("st / none ran no tests on refs/heads/main") != std::string::npos);
  const std::string metrics = pto::api_request("GET", s.url("/metrics")).body;
  CHECK(metrics.find("pto_runner_steps_ran_no_tests_total{branch=\"main\"} 1") != std::string::npos);
  CHECK(metrics.find("pto_runner_steps_ran_no_tests_total{branch=\"pull_request\"} 0") != std::string::npos);
  // A pull request's red run is not main-red, and this receiver hears of refs/heads/main only.
  s.wait_run(s.submit_run({{"jobs", {"st"}}, {"ref", "refs/pull/7/merge"}}), 120);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  CHECK(hook.requests().size() == 2);
  CHECK(pto::api_request("GET", s.url("/metrics")).body.find("pto_runner_steps_ran_no_tests_total{branch=\"pull_request\"} 1") != std::string::npos);
}

TEST_CASE("notify: while the receiver is down events wait in the outbox, the status and metrics say it fails, the daemon is "
          "SIGKILLed meanwhile, after the restart and the receiver's return each event arrives once and in order, SIGHUP "
          "reloads the receivers", "[notify][daemon]") {
  Receiver hook;
  hook.down(true);
  Served s;
  s.devices = "0-1";
  auto config = [&](const std::string& name) {
    s.dir.write("runner.yml", "sandbox: off\nnotify:\n  group-seconds: 0.1\n  retry-max-seconds: 1\n  receivers:\n"
                              "    - {name: " + name + ", kind: webhook, url: '" + hook.url("/hook") + "'}\n");
  };
  config("hook");
  write_project(s.dir, {{"red.yml", "name: red\nsteps:\n  - {name: fails, run: 'exit 1'}\n"}});
  s.start();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(s.submit_run({{"jobs", {"red"}}, {"ref", "refs/heads/main"}}));
    s.wait_run(ids.back());
  }
  json st;
  REQUIRE(wait_until([&] {
    st = s.get(pto::api_path::kStatus);
    return st["notify"].size() == 1 && st["notify"][0]["failing"] == true && st["notify"][0]["pending"] == 3;
  }, 20));
  CHECK(st["notify"][0]["last_error"].get<std::string>().find("HTTP 503") != std::string::npos);
  CHECK(pto::api_request("GET", s.url("/metrics")).body.find("pto_runner_notify_failing{receiver=\"hook\"} 1") != std::string::npos);
  CHECK(hook.requests().empty());

  s.stop(SIGKILL);
  s.start();
  hook.down(false);
  REQUIRE(wait_until([&] { return hook.requests().size() >= 3; }, 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::vector<std::string> order;
  std::map<std::string, int> seen;
  for (const json& r : hook.requests())
    for (const json& e : r["body"]["events"]) {
      const std::string run = e["details"]["run"];
      if (++seen[run] > 1) CHECK(r["body"]["possible_duplicate"] == true);  // a repeat is marked as one
      else order.push_back(run);
    }
  CHECK(order == ids);  // once each, in the order they happened
  REQUIRE(wait_until([&] { return s.get(pto::api_path::kStatus)["notify"][0]["failing"] == false; }, 10));
  CHECK(s.get(pto::api_path::kStatus)["notify"][0]["pending"] == 0);

  // SIGHUP: the receivers are read again.
  config("hook-renamed");
  ::kill(s.proc.pid, SIGHUP);
  REQUIRE(wait_until([&] {
    const json n = s.get(pto::api_path::kStatus)["notify"];
    return n.size() == 1 && n[0]["name"] == "hook-renamed";
  }, 10));
  CHECK((read_file(s.proc.err) + read_file(s.proc.out)).find("notify changed: hook-renamed") != std::string::npos);
}

namespace {

/// A receiver that accepts and never answers, or answers a byte a second (tests/fixtures/bad_receiver.py).
struct BadReceiver {
  TempDir dir;
  Background proc;
  int port = 0;
  explicit BadReceiver(const std::string& mode) {
    proc = start_background({"/usr/bin/python3", (source_dir() / "tests/fixtures/bad_receiver.py").string(), "--mode", mode, "--port-file",
                             (dir.path() / "port").string(), "--count-file", (dir.path() / "count").string()},
                            dir.path() / "stderr");
    REQUIRE(wait_until([&] { return fs::exists(dir.path() / "port"); }, 20));
    port = std::stoi(read_file(dir.path() / "port"));
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/hook"; }
  int connections() const {
    const std::string n = read_file(dir.path() / "count");
    return n.empty() ? 0 : std::stoi(n);
  }
};

const json* receiver_in(const json& status, const std::string& name) {
  for (const json& r : status["notify"])
    if (r["name"] == name) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("notify: three broken receivers (never answers, drips, answers 503) listed first hold up only themselves: the healthy "
          "one has each message while the hung ones are still on their first attempt, their backlog stays at max-pending, and "
          "nothing is lost for the healthy one across a SIGKILL", "[notify][daemon]") {
  BadReceiver hang("hang"), drip("drip");
  Receiver failing, healthy;
  failing.down(true);
  Served s;
  s.dir.write("runner.yml", "sandbox: off\nnotify:\n  group-seconds: 0.1\n  retry-max-seconds: 1\n  receivers:\n"
                            "    - {name: hang, kind: webhook, url: '" + hang.url() + "', max-pending: 3}\n"
                            "    - {name: drip, kind: webhook, url: '" + drip.url() + "', max-pending: 3}\n"
                            "    - {name: failing, kind: webhook, url: '" + failing.url("/hook") + "', max-pending: 3}\n"
                            "    - {name: healthy, kind: webhook, url: '" + healthy.url("/hook") + "'}\n");
  write_project(s.dir, {{"red.yml", "name: red\nsteps:\n  - {name: fails, run: 'exit 1'}\n"}});
  s.start();
  auto runs_told = [&] {
    std::set<std::string> runs;
    for (const json& r : healthy.requests())
      for (const json& e : r["body"]["events"]) runs.insert(e["details"]["run"].get<std::string>());
    return runs;
  };
  std::vector<std::string> ids = {s.submit_run({{"jobs", {"red"}}, {"ref", "refs/heads/main"}})};
  s.wait_run(ids.back());
  REQUIRE(wait_until([&] { return runs_told().count(ids.back()) == 1; }, 30));
  // The healthy one has it while the receivers ahead of it are still in their first delivery (each gives up
  // only after 10 s): one sender did not walk them in turn.
  json st = s.get(pto::api_path::kStatus);
  INFO(st["notify"].dump(2));
  CHECK(hang.connections() >= 1);
  CHECK(drip.connections() >= 1);
  CHECK((*receiver_in(st, "hang"))["failures"] == 0);
  CHECK((*receiver_in(st, "drip"))["failures"] == 0);

  // More red runs, a SIGKILL in the middle: the broken receivers' backlogs stay at 3, the oldest dropped and
  // counted; the healthy one is told of every run once.
  for (int i = 0; i < 3; ++i) {
    ids.push_back(s.submit_run({{"jobs", {"red"}}, {"ref", "refs/heads/main"}}));
    s.wait_run(ids.back());
  }
  s.stop(SIGKILL);
  s.start();
  for (int i = 0; i < 3; ++i) {
    ids.push_back(s.submit_run({{"jobs", {"red"}}, {"ref", "refs/heads/main"}}));
    s.wait_run(ids.back());
  }
  REQUIRE(wait_until([&] { return runs_told().size() == ids.size(); }, 30));
  CHECK(runs_told() == std::set<std::string>(ids.begin(), ids.end()));
  REQUIRE(wait_until([&] {
    st = s.get(pto::api_path::kStatus);
    return (*receiver_in(st, "failing"))["dropped"].get<int>() >= 1;
  }, 20));
  INFO(st["notify"].dump(2));
  for (const char* name : {"hang", "drip", "failing"}) {
    INFO(name);
    CHECK((*receiver_in(st, name))["pending"].get<int>() <= 3);
  }
  // Dropped since this daemon started: 3 more events for a backlog that was full already.
  CHECK((*receiver_in(st, "failing"))["dropped"] == 3);
  CHECK(pto::api_request("GET", s.url("/metrics")).body.find("pto_runner_notify_dropped_total{receiver=\"failing\"} 3") != std::string::npos);
  CHECK((*receiver_in(st, "healthy"))["pending"] == 0);
}
