#include "testcases/mutes.h"

#include <algorithm>

namespace pto {

bool test_glob_match(const std::string& glob, const std::string& id) {
  // Iterative wildcard match with one backtrack point: linear in practice, never exponential.
  std::size_t g = 0, i = 0, star = std::string::npos, mark = 0;
  while (i < id.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == id[i])) {
      ++g, ++i;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      mark = i;
    } else if (star != std::string::npos) {
      g = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

std::string utc_date(std::time_t t) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::optional<TestMute> TestMutes::match(const std::string& id, const std::string& today) const {
  for (const auto* list : {&configured_, &api_})
    for (const TestMute& m : *list)
      if (m.until >= today && test_glob_match(m.id, id)) return m;
  return std::nullopt;
}

std::vector<TestMute> TestMutes::all() const {
  std::vector<TestMute> out = configured_;
  out.insert(out.end(), api_.begin(), api_.end());
  return out;
}

int TestMutes::in_force(const std::string& today) const {
  int n = 0;
  for (const auto* list : {&configured_, &api_})
    for (const TestMute& m : *list) n += m.until >= today;
  return n;
}

std::string TestMutes::add(const TestMute& m, const std::string& today) {
  for (const TestMute& c : configured_)
    if (c.id == m.id && c.until >= today) return "runner.yml already mutes '" + m.id + "' (until " + c.until + "): change it there";
  auto same = std::find_if(api_.begin(), api_.end(), [&](const TestMute& a) { return a.id == m.id; });
  const bool replaces_in_force = same != api_.end() && same->until >= today;
  if (m.until >= today && !replaces_in_force && in_force(today) >= max_muted_)
    return std::to_string(in_force(today)) + " tests are muted already, at most tests.max-muted (" + std::to_string(max_muted_) +
           "): fix or unmute one first";
  if (same != api_.end()) *same = m;
  else api_.push_back(m);
  return "";
}

bool TestMutes::remove(const std::string& glob) {
  auto it = std::find_if(api_.begin(), api_.end(), [&](const TestMute& a) { return a.id == glob; });
  if (it == api_.end()) return false;
  api_.erase(it);
  return true;
}

}  // namespace pto
