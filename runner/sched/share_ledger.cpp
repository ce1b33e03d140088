#include "sched/share_ledger.h"

namespace pto {

void ShareLedger::hold(std::string_view share, const std::vector<int>& cards, double t) {
  if (share.empty()) return;
  auto it = shares_.find(share);
  if (it == shares_.end()) it = shares_.emplace(std::string(share), Share{}).first;
  it->second.forgotten = false;
  for (int c : cards) {
    if (card_.count(c)) give_back({c}, t);  // never counted twice
    card_[c] = {it->first, t};
    ++it->second.holding;
    it->second.held_since += t;
  }
}

void ShareLedger::give_back(const std::vector<int>& cards, double t) {
  for (int c : cards) {
    auto h = card_.find(c);
    if (h == card_.end()) continue;
    if (auto s = shares_.find(h->second.first); s != shares_.end()) {
      s->second.finished += t - h->second.second;
      --s->second.holding;
      s->second.held_since -= h->second.second;
      if (s->second.forgotten && s->second.holding == 0) shares_.erase(s);
    }
    card_.erase(h);
  }
}

double ShareLedger::used(std::string_view share, double t) const {
  auto it = shares_.find(share);
  if (it == shares_.end()) return 0;
  return it->second.finished + it->second.holding * t - it->second.held_since;
}

void ShareLedger::forget(std::string_view share) {
  auto it = shares_.find(share);
  if (it == shares_.end()) return;
  if (it->second.holding > 0) it->second.forgotten = true;  // erased when its cards come back
  else shares_.erase(it);
}

}  // namespace pto
