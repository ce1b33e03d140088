#include "config/device_spec.h"

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

namespace pto {

static bool parse_uint(const std::string& s, int& out) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoi(s);
  return true;
}

std::optional<std::vector<int>> parse_device_spec(const std::string& spec, std::string& error) {
  int count = 0;
  if (parse_uint(spec, count)) {
    if (count < 1 || count > 4096) {
      error = "device count must be 1-4096, got " + spec;
      return std::nullopt;
    }
    std::vector<int> ids(count);
    for (int i = 0; i < count; ++i) ids[i] = i;
    return ids;
  }
  return parse_card_list(spec, error);
}

std::optional<std::vector<int>> parse_card_list(const std::string& spec, std::string& error) {
  std::vector<int> ids;
  std::set<int> seen;
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    int lo = 0, hi = 0;
    auto dash = part.find('-');
    bool ok = dash == std::string::npos ? parse_uint(part, lo) && (hi = lo, true)
                                        : parse_uint(part.substr(0, dash), lo) && parse_uint(part.substr(dash + 1), hi);
    if (!ok || lo > hi || hi - lo >= 4096) {
      error = "bad device list '" + spec + "': '" + part + "' is not an id or a range lo-hi (e.g. 8, 0-7, 0,1,4,5)";
      return std::nullopt;
    }
    for (int i = lo; i <= hi; ++i) {
      if (!seen.insert(i).second) {
        error = "device " + std::to_string(i) + " is listed twice in '" + spec + "'";
        return std::nullopt;
      }
      ids.push_back(i);
    }
  }
  if (ids.empty()) {
    error = "empty device list";
    return std::nullopt;
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<std::vector<int>> parse_typed_devices(const std::string& spec, std::map<int, std::string>& types, std::string& error) {
  if (spec.find(':') == std::string::npos) return parse_device_spec(spec, error);
  static const std::regex type_re("[A-Za-z0-9_.-]{1,64}");
  std::vector<int> ids;
  std::string type;
  std::stringstream ss(spec);
  for (std::string part; std::getline(ss, part, ',');) {
    if (auto colon = part.find(':'); colon != std::string::npos) {
      type = part.substr(0, colon);
      part = part.substr(colon + 1);
      if (!std::regex_match(type, type_re)) {
        error = "bad card type '" + type + "' in '" + spec + "' (want TYPE:IDS, e.g. a2a3:0-7,a5:8-9)";
        return std::nullopt;
      }
    }
    if (type.empty()) {
      error = "'" + part + "' in '" + spec + "' has no card type: give every card one (TYPE:IDS), or none at all";
      return std::nullopt;
    }
    auto some = parse_card_list(part, error);
    if (!some) return std::nullopt;
    for (int id : *some) {
      if (types.count(id)) {
        error = "device " + std::to_string(id) + " is listed twice in '" + spec + "'";
        return std::nullopt;
      }
      types[id] = type;
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<std::vector<std::vector<int>>> parse_device_groups(const std::string& spec, std::string& error) {
  std::vector<std::vector<int>> groups;
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ';')) {
    if (part.empty()) continue;
    // Inside a group a lone number is an id, not a count.
    std::string err;
    std::optional<std::vector<int>> ids;
    int single = 0;
    if (parse_uint(part, single)) ids = std::vector<int>{single};
    else ids = parse_device_spec(part, err);
    if (!ids) {
      error = "bad device groups '" + spec + "': " + err;
      return std::nullopt;
    }
    groups.push_back(*ids);
  }
  return groups;
}

std::string check_device_groups(const std::vector<int>& ids, const std::vector<std::vector<int>>& groups) {
  std::set<int> pool(ids.begin(), ids.end());
  std::set<int> grouped;
  for (const auto& g : groups)
    for (int id : g) {
      if (!pool.count(id)) return "device " + std::to_string(id) + " is in a group but not in the device ids";
      if (!grouped.insert(id).second) return "device " + std::to_string(id) + " is in two groups";
    }
  return "";
}

int largest_gang(const std::vector<int>& ids, const std::vector<std::vector<int>>& groups) {
  if (groups.empty()) return static_cast<int>(ids.size());
  std::size_t best = ids.empty() ? 0 : 1;  // an ungrouped card still serves a 1-card step
  for (const auto& g : groups) best = std::max(best, g.size());
  return static_cast<int>(best);
}

std::string join_ids(const std::vector<int>& ids, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? sep : "") + std::to_string(ids[i]);
  return out;
}

std::string cards_phrase(const std::vector<int>& cards) {
  if (cards.empty()) return "no card";
  return (cards.size() == 1 ? "card " : "cards ") + join_ids(cards);
}

}  // namespace pto
