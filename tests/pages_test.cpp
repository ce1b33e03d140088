// The pages a person reads, rendered by headless Chromium with their scripts run (issue 23): a run's page
// (GET /runs/{id}: a bar per step on its card) and the cards page (GET /cards: a failure drawn on the card it
// happened on), and the status page linking both.
#include <catch2/catch.hpp>

#include <chrono>
#include <regex>
#include <thread>

#include "served_daemon.h"
#include "test_support.h"
#include "util/api_paths.h"

using namespace pto::test;
using nlohmann::json;

namespace {

/// The <rect> elements of `dom` whose attributes include every one of `want` (name="value").
int rects_with(const std::string& dom, const std::vector<std::string>& want) {
  static const std::regex rect("<rect[^>]*>");
  int n = 0;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), rect); it != std::sregex_iterator(); ++it) {
    const std::string tag = it->str();
    bool all = true;
    for (const auto& w : want) all &= tag.find(w) != std::string::npos;
    n += all;
  }
  return n;
}

}  // namespace

TEST_CASE("pages: headless Chromium draws a finished run's steps as bars on their cards, the cards page a failure on the card it happened on, and the status page links both",
          "[service]") {
  if (!have("chromium")) {
    WARN("SKIPPED: chromium is not installed (Debian package chromium; scripts/install-deps.sh installs it)");
    return;
  }
  Served s;
  s.devices = "2";
  // Exit 3 is the card's fault here: a health check of that card follows, and shows on its row.
  s.dir.write("runner.yml", "health: {infra-exit-codes: [3], check: 'echo probing card {device}'}\n");
  write_project(s.dir, {{"mixed.yml", "name: mixed\nparallel: true\nsteps:\n"
                                      "  - {name: 'Run pypto-lib DeepSeek-V4-Flash decode_swa example', devices: 1, run: 'sleep 0.3'}\n"
                                      "  - {name: breaks, devices: 1, retry: {max: 0}, run: 'echo the kernel said no; sleep 0.3; exit 3'}\n"}});
  s.start();
  const std::string id = s.submit_run({{"jobs", {"mixed"}}});
  json run = s.wait_run(id);
  REQUIRE(run["state"] == "failed");
  const json& fine = run["jobs"][0]["steps"][0];
  const json& breaks = run["jobs"][0]["steps"][1];
  REQUIRE(fine["cards"].size() == 1);
  REQUIRE(breaks["cards"].size() == 1);
  const std::string fine_card = std::to_string(fine["cards"][0].get<int>()), bad_card = std::to_string(breaks["cards"][0].get<int>());

  std::string dom;
  REQUIRE(s.page_dom(dom, api_path::run_page(id)));
  INFO(dom.substr(0, 6000));
  CHECK(rects_with(dom, {"class=\"bar succeeded\"", "data-step=\"1-1\"", "data-card=\"" + fine_card + "\""}) == 1);
  CHECK(rects_with(dom, {"class=\"bar failed\"", "data-step=\"1-2\"", "data-card=\"" + bad_card + "\""}) == 1);
  CHECK(rects_with(dom, {"class=\"bar queued\""}) == 2);  // each waited, if only milliseconds
  CHECK(dom.find("the kernel said no") != std::string::npos);  // the failed step's log tail, inline
  CHECK(dom.find(">mixed / Run pypto-lib DeepSeek-V4-Flash decode_swa example</text>") != std::string::npos);  // whole
  CHECK(dom.find("infra (exit 3 is in health.infra-exit-codes)") != std::string::npos);  // its verdict

  // The cards page: the failure on its card, the success on its own, both linking the run's page.
  std::string cards;
  REQUIRE(s.page_dom(cards, api_path::kCardsPage));
  INFO(cards.substr(0, 6000));
  CHECK(rects_with(cards, {"class=\"ev failed\"", "data-card=\"" + bad_card + "\"", "data-run=\"" + id + "\""}) == 1);
  CHECK(rects_with(cards, {"class=\"ev succeeded\"", "data-card=\"" + fine_card + "\""}) == 1);
  CHECK(rects_with(cards, {"class=\"ev failed\"", "data-card=\"" + fine_card + "\""}) == 0);
  CHECK(rects_with(cards, {"class=\"ev check-passed\"", "data-card=\"" + bad_card + "\"", "data-kind=\"health-check\""}) == 1);
  CHECK(cards.find("href=\"" + api_path::run_page(id) + "\"") != std::string::npos);

  // A drain shows on its card's row too, with its reason in the row's label.
  REQUIRE(s.post(api_path::device(std::stoi(bad_card), "drain"), {{"reason", "suspect after exit 3"}}).status == 200);
  REQUIRE(wait_until([&] {
    const json history = s.get(api_path::kCards);
    for (const auto& e : history["events"]) if (e["kind"] == "drain") return true;
    return false;
  }, 10));
  REQUIRE(s.page_dom(cards, api_path::kCardsPage));
  CHECK(rects_with(cards, {"class=\"ev drain\"", "data-card=\"" + bad_card + "\""}) == 1);
  CHECK(cards.find("drained - suspect after exit 3") != std::string::npos);

  // The status page links the run's page (not its JSON) and the cards page.
  std::string status;
  REQUIRE(s.page_dom(status, "/"));
  CHECK(status.find("href=\"" + api_path::run_page(id) + "\"") != std::string::npos);
  CHECK(status.find("href=\"/cards\"") != std::string::npos);
  CHECK(status.find("href=\"/tests\"") != std::string::npos);
  CHECK(status.find("id=\"bisections\"") != std::string::npos);

  // A card held now is drawn up to now (its event is written only when the hold ends), on an axis that spans
  // the host's short day rather than 24 hours.
  s.dir.write("jobs/hold.yml", "name: hold\nsteps:\n  - {name: holds, devices: 1, run: 'sleep 30'}\n");
  const std::string holding = s.submit_run({{"jobs", {"hold"}}});
  json held;
  REQUIRE(wait_until([&] {
    held = s.get(api_path::run(holding));
    return held["jobs"][0]["steps"][0]["state"] == "running";
  }, 20));
  const std::string held_card = std::to_string(held["jobs"][0]["steps"][0]["cards"][0].get<int>());
  REQUIRE(s.page_dom(cards, api_path::kCardsPage));
  CHECK(rects_with(cards, {"class=\"ev held\"", "data-card=\"" + held_card + "\"", "data-holder=\"hold / holds\""}) == 1);
  CHECK(cards.find("id=\"window\" class=\"muted\">the last 10m 0s<") != std::string::npos);  // not 24 h
  // Drained while it runs, the card's state starts anew; its holding does not.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // times are to the ms: the drain comes later
  REQUIRE(s.post(api_path::device(std::stoi(held_card), "drain"), {{"reason", "looks odd"}}).status == 200);
  for (const auto& c : s.get(api_path::kCards)["cards"])
    if (std::to_string(c["id"].get<int>()) == held_card) {
      REQUIRE(c["holder"].is_object());
      CHECK(c["holder"]["label"] == "hold / holds");
      CHECK(c["holder"]["since"].get<std::string>() < s.get(api_path::kStatus)["devices"][std::stoi(held_card)]["since"].get<std::string>());
    }
  REQUIRE(s.post(api_path::run_cancel(holding), json::object()).status < 300);
  s.wait_run(holding);

  // The history outlives a restart (the journal's card_events).
  s.stop();
  s.start();
  int events = 0;
  const json history = s.get(api_path::kCards);
  for (const auto& e : history["events"]) events += e.value("run", "") == id;
  CHECK(events == 3);  // its two steps and the health check after the failed one
  // An unknown run's page is 404, not a page that cannot load.
  CHECK(pto::api_request("GET", s.url(api_path::run_page("not-a-run"))).status == 404);
}
