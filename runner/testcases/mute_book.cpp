#include "testcases/mute_book.h"

#include <spdlog/spdlog.h>

#include "util/iso_time.h"

namespace pto {

MuteBook::MuteBook(const TestsConfig& configured, std::vector<TestMute> kept, Keep keep)
    : mutes_(configured.mute, std::move(kept), configured.max_muted), configured_(configured.mute), keep_(std::move(keep)) {}

Answer MuteBook::mute(const TestMute& m, const std::string& who) {
  TestMute mute = m;
  mute.by = who;
  mute.at = iso_now();
  TestMutes next = mutes_;
  if (std::string why = next.add(mute, utc_date()); !why.empty()) return Answer::error(Outcome::Conflict, why);
  if (std::string why = keep_(next.api()); !why.empty()) return Answer::error(Outcome::Unavailable, "the mute cannot be kept: " + why);
  mutes_ = std::move(next);
  spdlog::info("test '{}' muted until {} by {}: {}", mute.id, mute.until, who, mute.reason);
  return Answer{Outcome::Ok, {{"muted", mute.json()}, {"in_force", in_force()}, {"max_muted", mutes_.max_muted()}}};
}

Answer MuteBook::unmute(const std::string& glob, const std::string& who) {
  TestMutes next = mutes_;
  if (!next.remove(glob)) {
    for (const TestMute& c : configured_)
      if (c.id == glob) return Answer::error(Outcome::Conflict, "'" + glob + "' is muted in runner.yml: remove it there (and send SIGHUP)");
    return Answer::error(Outcome::NotFound, "no mute of '" + glob + "' made through the API");
  }
  if (std::string why = keep_(next.api()); !why.empty()) return Answer::error(Outcome::Unavailable, "the mute cannot be removed: " + why);
  mutes_ = std::move(next);
  spdlog::info("test '{}' unmuted by {}", glob, who);
  return Answer{Outcome::Ok, {{"unmuted", glob}, {"in_force", in_force()}}};
}

void MuteBook::reconfigure(const TestsConfig& configured) {
  mutes_ = TestMutes(configured.mute, mutes_.api(), configured.max_muted);
  configured_ = configured.mute;
}

}  // namespace pto
