#include "engine/failure_evidence.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "config/device_spec.h"

namespace pto {

nlohmann::json FailureEvidence::json() const {
  nlohmann::json j = {{"cause", to_string(cause)}, {"reason", reason}, {"cards", cards}};
  if (!matched_line.empty()) j["log_line"] = matched_line;
  if (!pattern.empty()) j["pattern"] = pattern;
  return j;
}

namespace {

// One line of a log, trimmed of its end and cut to a length a status can show.
std::string shown(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  return std::string(line.substr(0, 300));
}

}  // namespace

FailureEvidence classify_failure(const AttemptEnd& end, const HealthConfig& health, std::string_view log) {
  FailureEvidence e;
  if (end.timed_out) {
    e.cause = FailureCause::Timeout;
    e.reason = "it ran out of time";
    return e;
  }
  // The log, line by line: the first fault pattern that matches wins; harness markers are counted per card.
  static const std::regex marker(R"(PYPTO_EXEC_RESULT=(PASS|FAIL|INFRA)\b.*\bdevice=(\d+))");
  std::map<int, int> passed, failed, infra;
  std::string first_failed_case, first_infra_case;
  std::size_t at = 0;
  while (at < log.size()) {
    std::size_t nl = log.find('\n', at);
    std::string_view line = log.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? log.size() : nl + 1;
    if (line.empty()) continue;
    const std::string text(line);
    if (e.pattern.empty())
      for (const auto& fp : health.fault_patterns) {
        std::smatch m;
        if (!fp.re || !std::regex_search(text, m, *fp.re)) continue;
        e.cause = fp.cause;
        e.pattern = fp.pattern;
        e.matched_line = shown(line);
        if (fp.card_group > 0 && m[fp.card_group].matched) {
          try {
            e.cards = {std::stoi(m[fp.card_group].str())};
          } catch (...) {
            e.cards = end.cards;
          }
        } else {
          e.cards = end.cards;
        }
        break;
      }
    if (line.find("PYPTO_EXEC_RESULT=") == std::string_view::npos) continue;
    std::smatch m;
    if (!std::regex_search(text, m, marker)) continue;
    int card = std::stoi(m[2].str());
    const std::string r = m[1].str();
    if (r == "PASS") ++passed[card];
    else if (r == "FAIL") ++failed[card], first_failed_case = first_failed_case.empty() ? shown(line) : first_failed_case;
    else ++infra[card], first_infra_case = first_infra_case.empty() ? shown(line) : first_infra_case;
  }
  auto card_list = [](const std::map<int, int>& m) {
    std::vector<int> ids;
    for (const auto& [c, n] : m) ids.push_back(c);
    return ids;
  };
  if (!e.pattern.empty()) {
    e.reason = std::string(e.cause == FailureCause::Card ? "the log names a card fault" : "the log names a host fault") + " (" +
               e.pattern + ")" + (e.cards.empty() ? "" : " on " + std::string(e.cards.size() == 1 ? "card " : "cards ") + join_ids(e.cards));
    return e;
  }
  if (!infra.empty()) {
    e.cause = FailureCause::Infra;
    e.cards = card_list(infra);
    e.matched_line = first_infra_case;
    e.reason = "the harness marked cases INFRA on " + std::string(e.cards.size() == 1 ? "card " : "cards ") + join_ids(e.cards);
    return e;
  }
  if (!failed.empty()) {
    // Failed cases only on some of the cards cases ran on, and others passed elsewhere: those cards', not the
    // commit's (a regression fails its cases wherever they run).
    std::set<int> ran;
    for (const auto& [c, n] : passed) ran.insert(c);
    for (const auto& [c, n] : failed) ran.insert(c);
    bool elsewhere_clean = false;
    for (int c : ran) elsewhere_clean |= !failed.count(c) && passed.count(c);
    if (elsewhere_clean) {
      e.cause = FailureCause::Card;
      e.cards = card_list(failed);
      e.matched_line = first_failed_case;
      int n = 0;
      for (const auto& [c, k] : failed) n += k;
      e.reason = std::to_string(n) + " failed case(s), all on " + std::string(e.cards.size() == 1 ? "card " : "cards ") +
                 join_ids(e.cards) + "; cases on the other cards passed";
      return e;
    }
  }
  const bool infra_exit = std::count(health.infra_exit_codes.begin(), health.infra_exit_codes.end(), end.exit_code) > 0;
  const bool infra_signal = end.signal && std::count(health.infra_signals.begin(), health.infra_signals.end(), end.signal) > 0;
  if (infra_exit || infra_signal || end.host_problem) {
    e.cause = FailureCause::Infra;
    e.cards = end.cards;
    e.reason = infra_exit ? "exit " + std::to_string(end.exit_code) + " is in health.infra-exit-codes"
               : infra_signal ? "signal " + std::to_string(end.signal) + " is in health.infra-signals"
                              : "the host failed it";
    return e;
  }
  e.cause = FailureCause::Code;
  e.reason = end.signal ? "signal " + std::to_string(end.signal) : "exit " + std::to_string(end.exit_code);
  return e;
}

}  // namespace pto
