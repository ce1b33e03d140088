// SIGHUP's settings (config/settings_reload): what moves over live, what waits for a restart, each said once.
#include <catch2/catch.hpp>

#include <algorithm>

#include "config/settings_reload.h"

using namespace pto;

namespace {
bool said(const SettingsReload& r, const std::string& part) {
  return std::any_of(r.said.begin(), r.said.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; });
}
}  // namespace

TEST_CASE("reload: live settings move over and are said, restart-only ones stay as started and are said to need a restart",
          "[config][reload]") {
  RunnerConfig now;
  now.listen = "127.0.0.1:7070";
  now.kill_grace_seconds = 10;
  now.max_cards_per_run = 0;
  RunnerConfig next = now;

  SECTION("the same file: nothing said, nothing changed") {
    SettingsReload r = reload_settings(now, next);
    CHECK(r.said.empty());
    CHECK(r.applied.kill_grace_seconds == 10);
  }
  SECTION("a live setting and a restart-only one") {
    next.kill_grace_seconds = 2.5;
    next.max_cards_per_run = 4;
    next.listen = "0.0.0.0:7070";
    next.device_ids = {0, 1};
    SettingsReload r = reload_settings(now, next);
    CHECK(r.applied.kill_grace_seconds == 2.5);
    CHECK(r.applied.max_cards_per_run == 4);
    CHECK(r.applied.device_ids == std::vector<int>{0, 1});
    CHECK(r.applied.listen == "127.0.0.1:7070");  // where it listens changes at the next start only
    CHECK(said(r, "kill-grace-seconds 10 -> 2.5"));
    CHECK(said(r, "max-cards-per-run 4"));
    CHECK(said(r, "listen changed to '0.0.0.0:7070': takes effect at the next start (now '127.0.0.1:7070')"));
    CHECK_FALSE(said(r, "state-dir"));
  }
}
