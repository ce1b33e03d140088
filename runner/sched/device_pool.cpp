#include "sched/device_pool.h"

#include <cmath>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "config/device_spec.h"
#include "exec/open_files.h"
#include "util/json_text.h"
#include "util/clock.h"

namespace fs = std::filesystem;

namespace pto {

std::string to_string(CardState s) {
  switch (s) {
    case CardState::Free: return "free";
    case CardState::Busy: return "busy";
    case CardState::Reserved: return "reserved";
    case CardState::Drained: return "drained";
  }
  return "?";
}


std::string resolve_lock_dir(const std::string& configured) {
  std::error_code ec;
  fs::create_directories(configured, ec);
  if (!ec && access(configured.c_str(), W_OK) == 0) return configured;
  if (configured != "/var/lock/pto-runner") return configured;  // an explicit choice: report its error
  std::string fallback = "/tmp/pto-runner-locks-" + std::to_string(getuid());
  fs::create_directories(fallback, ec);
  return fallback;
}

DevicePool::DevicePool(const RunnerConfig& cfg, std::string state_dir)
    : groups_(cfg.device_groups),
      lock_dir_(resolve_lock_dir(expand_home(cfg.lock_dir))),
      lock_name_(cfg.lock_name),
      state_file_(state_dir.empty() ? "" : state_dir + "/devices.json"),
      drain_after_(cfg.health.drain_after),
      health_(cfg.health) {
  for (int id : cfg.device_ids) {
    cards_[id].since = iso_now();
    cards_[id].type = cfg.type_of(id);
    cards_[id].files = cfg.files_of_card(id);
  }
}

std::string DevicePool::init() {
  std::error_code ec;
  fs::create_directories(lock_dir_, ec);
  if (ec || access(lock_dir_.c_str(), W_OK) != 0)
    return "cannot use lock directory " + lock_dir_ + ": " + (ec ? ec.message() : "not writable");
  // The lock dir must be ours alone: a directory another user made in advance (or may write) could hold their
  // links and their lock files, and hold or fake every card.
  struct stat st {};
  if (::lstat(lock_dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "the lock directory " + lock_dir_ + " is not a directory (a symbolic link?)";
  if (st.st_uid == ::geteuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) && ::chmod(lock_dir_.c_str(), 0755) == 0)
    st.st_mode &= ~static_cast<mode_t>(S_IWGRP | S_IWOTH);  // ours, made under a loose umask
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
    return "the lock directory " + lock_dir_ + " belongs to uid " + std::to_string(st.st_uid) + " or is writable by others: "
           "another user could plant links or hold the cards' lock files there (chown it to uid " + std::to_string(::geteuid()) +
           " and chmod 0755, or give devices.lock-dir another directory)";
  load_drained();
  return "";
}

bool DevicePool::acquire(const std::vector<int>& cards, const std::string& label, double expected_end,
                         std::string& why) {
  std::vector<CardLock> got;
  for (int id : cards) {  // ascending: two runners never deadlock half-way
    std::string holder, error;
    auto lock = CardLock::try_acquire(lock_dir_, id, label, holder, error, lock_name_);
    if (!lock) {
      if (!error.empty()) {
        why = error;
      } else {
        cards_[id].outside_holder = locked_by(id, holder);
        why = "card " + std::to_string(id) + " is locked by " + holder;
        got.clear();      // what this call took goes back first: it is not someone else's
        probe_outside();  // every other card held outside, too
      }
      return false;
    }
    got.push_back(std::move(*lock));
  }
  // Locked: but a process no lock speaks for may still use a card (the incumbent's wrapper, which held the
  // flock, exits before its task's detached process does).
  const auto t = steady_now();
  auto needs_scan = [&](const Card& c) {
    // A scan is fresh for a card not held since: one we let go of has it scanned again (kHandOver's case).
    const bool fresh = t - c.scanned_at <= kScanFresh && c.scanned_at > c.released_at;
    return !c.files.empty() && (scan_at_hand_over_ || t - c.released_at > kHandOver) && !fresh;
  };
  std::vector<int> scanned;
  for (int id : cards)
    if (needs_scan(cards_[id])) scanned.push_back(id);
  if (!scanned.empty())
    for (const auto& [id, c] : cards_)  // the same pass for every other idle card (kScanFresh)
      if (!c.lock && c.outside_holder.empty() && !c.drained && needs_scan(c) && std::find(cards.begin(), cards.end(), id) == cards.end())
        scanned.push_back(id);
  std::vector<std::string> files;
  std::map<std::string, int> card_of_file;
  for (int id : scanned)
    for (const auto& f : cards_[id].files) files.push_back(f), card_of_file[f] = id;
  std::string used;  // the first of `cards` found in use
  for (const auto& u : processes_with_open(files)) {
    const int id = card_of_file[u.path];
    if (cards_[id].outside_holder.empty() || std::find(cards.begin(), cards.end(), id) != cards.end()) cards_[id].outside_holder = u.describe();
    if (used.empty() && std::find(cards.begin(), cards.end(), id) != cards.end()) used = u.describe();
  }
  for (int id : scanned)
    if (cards_[id].outside_holder.empty()) cards_[id].scanned_at = t;
  if (!used.empty()) {
    why = used;
    return false;
  }
  std::string now = iso_now();
  for (auto& l : got) {
    Card& c = cards_[l.card()];
    c.holder = label;
    c.outside_holder.clear();
    c.expected_end = expected_end;
    c.since = now;
    c.held_since = steady_now();
    c.held_since_iso = now;
    c.lock.emplace(std::move(l));
  }
  return true;
}

void DevicePool::relabel(int card, const std::string& label) {
  if (auto it = cards_.find(card); it != cards_.end() && it->second.lock) it->second.holder = label;
}

void DevicePool::release(const std::vector<int>& cards) {
  std::string now = iso_now();
  for (int id : cards) {
    auto it = cards_.find(id);
    if (it == cards_.end()) continue;
    if (it->second.lock)
      it->second.busy_seconds += std::chrono::duration<double>(steady_now() - it->second.held_since).count();
    if (it->second.lock) it->second.released_at = steady_now();
    it->second.lock.reset();
    it->second.holder.clear();
    it->second.since = now;
  }
}

std::string DevicePool::locked_by(int id, const std::string& holder) const {
  return "another program holds " + CardLock::path_for(lock_dir_, id, lock_name_) + " (" + holder + ")";
}

std::map<int, std::string> DevicePool::outside_users(const std::vector<int>& ids) const {
  std::map<int, std::string> out;
  std::vector<std::string> files;
  std::map<std::string, int> card_of_file;
  for (int id : ids) {
    std::string holder;
    if (CardLock::held_elsewhere(lock_dir_, id, holder, lock_name_)) {
      out[id] = locked_by(id, holder);
      continue;
    }
    for (const auto& f : cards_.at(id).files) files.push_back(f), card_of_file[f] = id;
  }
  for (const auto& u : processes_with_open(files))  // one pass over /proc for every card asked about
    out.emplace(card_of_file[u.path], u.describe());
  return out;
}

void DevicePool::probe_outside() {
  std::vector<int> ids;
  for (const auto& [id, c] : cards_)
    if (!c.lock && c.outside_holder.empty() && !c.drained) ids.push_back(id);
  for (auto& [id, who] : outside_users(ids)) cards_[id].outside_holder = who;
}

bool DevicePool::watch_outside(bool scan_files) {
  std::vector<int> ids;
  for (const auto& [id, c] : cards_)
    if (!c.lock && c.outside_holder.empty() && !c.drained) ids.push_back(id);
  if (ids.empty()) return false;
  const std::set<std::string> flocked = CardLock::flocked_files();
  bool found = false;
  std::vector<std::string> files;
  std::map<std::string, int> card_of_file;
  for (int id : ids) {
    std::string holder;
    if (CardLock::seen_held(lock_dir_, id, lock_name_, flocked, holder)) {
      cards_[id].outside_holder = locked_by(id, holder);
      found = true;
    } else if (scan_files) {
      for (const auto& f : cards_.at(id).files) files.push_back(f), card_of_file[f] = id;
    }
  }
  for (const auto& u : processes_with_open(files))
    if (cards_[card_of_file[u.path]].outside_holder.empty()) {
      cards_[card_of_file[u.path]].outside_holder = u.describe();
      found = true;
    }
  return found;
}

bool DevicePool::refresh_outside() {
  std::vector<int> ids;
  for (const auto& [id, c] : cards_)
    if (!c.outside_holder.empty()) ids.push_back(id);
  if (ids.empty()) return false;
  auto users = outside_users(ids);
  bool freed = false;
  for (int id : ids) {
    auto it = users.find(id);
    cards_[id].outside_holder = it == users.end() ? "" : it->second;
    freed |= it == users.end();
  }
  return freed;
}

bool DevicePool::any_held_outside() const {
  for (const auto& [id, c] : cards_)
    if (!c.outside_holder.empty()) return true;
  return false;
}

std::vector<SchedCard> DevicePool::snapshot() const {
  std::vector<SchedCard> out;
  for (const auto& [id, c] : cards_) {
    SchedCard s;
    s.id = id;
    s.usable = !c.drained;
    s.free = !c.drained && !c.lock && c.outside_holder.empty();
    s.holder = c.lock ? c.holder : c.outside_holder;
    if (c.lock) s.busy_until = c.expected_end;
    s.type = c.type;
    out.push_back(s);
  }
  return out;
}

std::vector<CardStatus> DevicePool::status(const std::map<int, std::uint64_t>& reserved) const {
  std::vector<CardStatus> out;
  for (const auto& [id, c] : cards_) {
    CardStatus s;
    s.id = id;
    s.since = c.since;
    s.drain_reason = c.drain_reason;
    s.consecutive_infra_failures = c.failures;
    s.health = c.health;
    for (const auto& ch : c.charges) s.evidence.push_back(ch.run + ": " + ch.what);
    s.type = c.type;
    s.lock_file = CardLock::path_for(lock_dir_, id, lock_name_);
    s.busy_seconds = c.busy_seconds;
    if (c.lock) {
      s.busy_seconds += std::chrono::duration<double>(steady_now() - c.held_since).count();
      s.holder = c.holder;  // also on a drained card: what still runs on it
      s.held_since = c.held_since_iso;
    }
    if (c.drained) s.state = CardState::Drained;
    else if (c.lock) s.state = CardState::Busy, s.holder = c.holder;
    else if (!c.outside_holder.empty()) s.state = CardState::Busy, s.holder = c.outside_holder, s.held_outside = true;
    else if (reserved.count(id)) s.state = CardState::Reserved;
    for (const auto& g : groups_)
      if (std::find(g.begin(), g.end(), id) != g.end()) s.group = g;
    out.push_back(s);
  }
  return out;
}

std::vector<int> DevicePool::record_result(const std::vector<int>& cards, bool infra_failure, const std::string& what) {
  std::vector<int> drained;
  for (int id : cards) {
    auto it = cards_.find(id);
    if (it == cards_.end()) continue;
    Card& c = it->second;
    if (!infra_failure) {
      c.failures = 0;
      continue;
    }
    if (++c.failures >= drain_after_ && !c.drained &&
        drain_bad(id, std::to_string(c.failures) + " infrastructure failures in a row (last: " + what + ")"))
      drained.push_back(id);
  }
  return drained;
}

std::string to_string(CardHealth h) {
  switch (h) {
    case CardHealth::Good: return "good";
    case CardHealth::Suspect: return "suspect";
    case CardHealth::Bad: return "bad";
    case CardHealth::Probing: return "probing";
    case CardHealth::Maintenance: return "maintenance";
    case CardHealth::Retired: return "retired";
  }
  return "good";
}

std::vector<std::string> DevicePool::reconfigure(const RunnerConfig& cfg) {
  health_ = cfg.health;
  std::vector<std::string> changes;
  std::set<int> wanted(cfg.device_ids.begin(), cfg.device_ids.end());
  const std::string kRemoved = "removed from runner.yml by a reload";
  for (int id : cfg.device_ids) {
    if (!cards_.count(id)) {
      cards_[id].since = iso_now();
      changes.push_back("card " + std::to_string(id) + " added");
    } else if (cards_[id].drained && cards_[id].drain_reason.rfind(kRemoved, 0) == 0) {
      undrain(id);  // removed while busy, listed again: back in service
      changes.push_back("card " + std::to_string(id) + " listed again");
    }
  }
  for (auto it = cards_.begin(); it != cards_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    if (it->second.lock) {
      // Something runs on it: it stays, drained, until the daemon restarts (the lock is released normally).
      if (!it->second.drained) drain(it->first, kRemoved + "; busy, so kept until it is free and the daemon restarts");
      changes.push_back("card " + std::to_string(it->first) + " removed (busy: drained until a restart)");
      ++it;
    } else {
      changes.push_back("card " + std::to_string(it->first) + " removed");
      it = cards_.erase(it);
    }
  }
  for (auto& [id, c] : cards_) {
    std::string type = cfg.type_of(id);
    if (type != c.type && wanted.count(id))
      changes.push_back("card " + std::to_string(id) + " type " + (c.type.empty() ? "(none)" : c.type) + " -> " +
                        (type.empty() ? "(none)" : type));
    if (wanted.count(id)) c.type = type;
  }
  if (groups_ != cfg.device_groups) {
    changes.push_back("card groups changed");
    groups_ = cfg.device_groups;
  }
  if (drain_after_ != cfg.health.drain_after) {
    changes.push_back("health.drain-after " + std::to_string(drain_after_) + " -> " + std::to_string(cfg.health.drain_after));
    drain_after_ = cfg.health.drain_after;
  }
  save_drained();
  return changes;
}

void DevicePool::adopt(const std::vector<int>& cards, const std::vector<int>& fds, const std::string& label) {
  const std::string now = iso_now();
  for (std::size_t i = 0; i < cards.size(); ++i) {
    auto it = cards_.find(cards[i]);
    if (it == cards_.end()) {
      if (i < fds.size()) ::close(fds[i]);
      continue;
    }
    Card& c = it->second;
    if (i < fds.size()) {
      c.lock.emplace(CardLock::adopt(fds[i], cards[i]));
    } else {
      std::string holder, error;
      if (auto l = CardLock::try_acquire(lock_dir_, cards[i], label, holder, error, lock_name_)) c.lock.emplace(std::move(*l));
    }
    c.holder = label;
    c.outside_holder.clear();
    c.since = now;
    c.held_since = steady_now();
    c.held_since_iso = now;
  }
}

std::vector<int> DevicePool::lock_fds(const std::vector<int>& cards) const {
  std::vector<int> out;
  for (int id : cards)
    if (auto it = cards_.find(id); it != cards_.end() && it->second.lock) out.push_back(it->second.lock->fd());
  return out;
}

void DevicePool::drain(int card, const std::string& reason) {
  auto it = cards_.find(card);
  if (it == cards_.end()) return;
  it->second.drained = true;
  it->second.health = CardHealth::Maintenance;
  it->second.drain_reason = reason;
  it->second.since = iso_now();
  save_drained();
}

int DevicePool::auto_drained() const {
  int n = 0;
  for (const auto& [id, c] : cards_)
    n += c.drained && (c.health == CardHealth::Bad || c.health == CardHealth::Probing || c.health == CardHealth::Retired);
  return n;
}

bool DevicePool::drain_bad(int card, const std::string& reason) {
  auto it = cards_.find(card);
  if (it == cards_.end() || it->second.drained) return false;
  if (auto_drained() >= health_.max_auto_drained) return false;
  Card& c = it->second;
  c.probes_passed = 0;
  c.drained = true;
  const CardHealth was = c.health;
  c.health = CardHealth::Bad;
  c.drain_reason = reason;
  c.since = iso_now();
  // Bad again and again though its probes pass: its faults come back under load. No more probing.
  const double now = std::chrono::duration<double>(wall_now().time_since_epoch()).count();
  while (!c.bad_spells.empty() && c.bad_spells.front() < now - kRetireWindowSeconds) c.bad_spells.pop_front();
  c.bad_spells.push_back(now);
  if (health_.retire_after > 0 && static_cast<int>(c.bad_spells.size()) >= health_.retire_after) {
    c.health = CardHealth::Retired;
    c.drain_reason = "retired: bad " + std::to_string(c.bad_spells.size()) + " times in 7 days (health.retire-after " +
                     std::to_string(health_.retire_after) + "), back only by a person (devices --undrain " + std::to_string(card) + "); " + reason;
  }
  save_drained();
  if (on_health_) on_health_(card, was, c.health, c.drain_reason);
  return true;
}

void DevicePool::age_charges(Card& c, double now) const {
  while (!c.charges.empty() && c.charges.front().at < now - health_.window_minutes * 60) c.charges.pop_front();
  if (c.health == CardHealth::Suspect && c.charges.empty()) c.health = CardHealth::Good;
}

std::string DevicePool::charge(int card, const std::string& run, const std::string& what, double now) {
  auto it = cards_.find(card);
  if (it == cards_.end()) return "card " + std::to_string(card) + " (not one of this host's cards)";
  Card& c = it->second;
  age_charges(c, now);
  c.charges.push_back({now, run, what});
  std::set<std::string> runs;
  for (const auto& ch : c.charges) runs.insert(ch.run);
  const double minutes = std::max(1.0, std::ceil((now - c.charges.front().at) / 60));
  const std::string tally = std::to_string(c.charges.size()) + (c.charges.size() == 1 ? " failure in " : " failures in ") +
                            std::to_string(runs.size()) + (runs.size() == 1 ? " run" : " runs") +
                            (c.charges.size() > 1 ? " in " + std::to_string(static_cast<int>(minutes)) + " min" : "") + "; " + what;
  const std::string name = "card " + std::to_string(card);
  if (c.drained) return name + " " + to_string(c.health) + " (" + tally + ")";
  if (static_cast<int>(runs.size()) >= health_.bad_after_runs) {
    if (drain_bad(card, tally)) return name + (c.health == CardHealth::Retired ? " retired" : " drained") + " (" + tally + ")";
    c.health = CardHealth::Suspect;
    return name + " suspect (" + tally + "); not drained: health.max-auto-drained (" + std::to_string(health_.max_auto_drained) +
           ") cards are drained already";
  }
  c.health = CardHealth::Suspect;
  return name + " suspect (" + tally + ")";
}

std::vector<int> DevicePool::idle_bad_cards() const {
  std::vector<int> out;
  for (const auto& [id, c] : cards_)
    if (c.drained && c.health == CardHealth::Bad && !c.lock && c.outside_holder.empty()) out.push_back(id);
  return out;
}

void DevicePool::probe_started(int card) {
  if (auto it = cards_.find(card); it != cards_.end() && it->second.health == CardHealth::Bad) it->second.health = CardHealth::Probing;
}

bool DevicePool::probe_ended(int card, bool passed) {
  auto it = cards_.find(card);
  if (it == cards_.end() || it->second.health != CardHealth::Probing) return false;
  Card& c = it->second;
  c.health = CardHealth::Bad;
  if (!passed) {
    c.probes_passed = 0;
    return false;
  }
  if (++c.probes_passed < health_.return_after) return false;
  c.probes_passed = 0;
  undrain(card);  // good again, its evidence cleared
  return true;
}

std::string DevicePool::failing_elsewhere(int card, const std::string& run, double now) const {
  auto it = cards_.find(card);
  if (it == cards_.end()) return "";
  std::set<std::string> others;
  std::string what;
  for (const auto& ch : it->second.charges)
    if (ch.run != run && ch.at >= now - health_.window_minutes * 60) others.insert(ch.run), what = ch.what;
  if (others.empty()) return "";
  return "card " + std::to_string(card) + " failed " + std::to_string(others.size()) + " other run" + (others.size() == 1 ? "'s" : "s'") +
         " work in the last " + std::to_string(static_cast<int>(health_.window_minutes)) + " min (" + what + ")";
}

bool DevicePool::undrain(int card) {
  auto it = cards_.find(card);
  if (it == cards_.end() || !it->second.drained) return false;
  if (it->second.health == CardHealth::Retired) it->second.bad_spells.clear();  // a person's: a new (or mended) card
  const CardHealth was = it->second.health;
  it->second.drained = false;
  it->second.drain_reason.clear();
  it->second.failures = 0;
  it->second.health = CardHealth::Good;
  it->second.charges.clear();
  it->second.since = iso_now();
  save_drained();
  if (on_health_) on_health_(card, was, CardHealth::Good, "");
  return true;
}

bool DevicePool::is_drained(int card) const {
  auto it = cards_.find(card);
  return it != cards_.end() && it->second.drained;
}

void DevicePool::save_drained() const {
  if (state_file_.empty()) return;
  nlohmann::json j = {{"drained", nlohmann::json::object()}};
  for (const auto& [id, c] : cards_)
    if (c.drained) {
      nlohmann::json evidence = nlohmann::json::array();
      for (const auto& ch : c.charges) evidence.push_back({{"at", ch.at}, {"run", ch.run}, {"what", ch.what}});
      j["drained"][std::to_string(id)] = {{"reason", c.drain_reason}, {"since", c.since}, {"health", to_string(c.health)}, {"evidence", evidence}};
    }
  // Its bad spells outlive a return to service: a card that keeps coming back bad is retired across restarts.
  for (const auto& [id, c] : cards_)
    if (!c.bad_spells.empty()) j["bad_spells"][std::to_string(id)] = c.bad_spells;
  std::error_code ec;
  fs::create_directories(fs::path(state_file_).parent_path(), ec);
  std::string tmp = state_file_ + ".tmp." + std::to_string(getpid());
  { std::ofstream(tmp) << dump_json(j, 2) << "\n"; }
  fs::rename(tmp, state_file_, ec);  // atomic: a reader never sees half a file
}

void DevicePool::load_drained() {
  if (state_file_.empty()) return;
  std::ifstream in(state_file_);
  if (!in) return;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("drained") || !j["drained"].is_object()) return;
  if (j.contains("bad_spells") && j["bad_spells"].is_object())
    for (const auto& [key, v] : j["bad_spells"].items()) {
      auto it = cards_.find(std::atoi(key.c_str()));
      if (it == cards_.end() || !v.is_array()) continue;
      for (const auto& t : v)
        if (t.is_number()) it->second.bad_spells.push_back(t.get<double>());
    }
  for (const auto& [key, v] : j["drained"].items()) {
    char* end = nullptr;
    long id = std::strtol(key.c_str(), &end, 10);
    auto it = cards_.find(static_cast<int>(id));
    if (*end || it == cards_.end()) continue;
    it->second.drained = true;
    it->second.drain_reason = v.value("reason", "drained");
    it->second.since = v.value("since", iso_now());
    // A file from before health states: a drain whose origin is unknown stays until a person returns it.
    const std::string h = v.value("health", "");
    it->second.health = h == "bad" || h == "probing" ? CardHealth::Bad : h == "retired" ? CardHealth::Retired : CardHealth::Maintenance;
    if (v.contains("evidence") && v["evidence"].is_array())
      for (const auto& ch : v["evidence"])
        if (ch.is_object() && ch.contains("at") && ch["at"].is_number())
          it->second.charges.push_back({ch["at"].get<double>(), ch.value("run", ""), ch.value("what", "")});
  }
}

}  // namespace pto
