#pragma once
// ShareLedger: the card-time each run (a "share") has used on this host, for fair share between runs
// (sched/queue_order). Cards a run holds count from when it got them until they are given back; what it held
// before adds up. Pure: the caller says what time it is (the dispatcher's steady clock, or the start
// forecast's virtual one), so the forecast replays exactly what the dispatcher will do.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pto {

class ShareLedger {
 public:
  /// `share` holds `cards` from `t` on.
  void hold(std::string_view share, const std::vector<int>& cards, double t);
  /// `cards` are given back at `t` (cards no share holds are ignored).
  void give_back(const std::vector<int>& cards, double t);
  /// Card-seconds `share` has used up to `t`, its current holdings included.
  double used(std::string_view share, double t) const;
  /// A run that ended: its past use no longer matters (it competes with nobody any more).
  void forget(std::string_view share);

 private:
  struct Share {
    double finished = 0;      // card-seconds of holdings given back
    int holding = 0;          // cards held now
    double held_since = 0;    // the sum of their start times: now's use is holding * t - held_since
    bool forgotten = false;   // its run ended while it still held cards: gone once they are back
  };
  std::map<std::string, Share, std::less<>> shares_;
  std::map<int, std::pair<std::string, double>> card_;  // card -> its share and since when
};

}  // namespace pto
