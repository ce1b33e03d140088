#include "testcases/verdict.h"

#include <algorithm>
#include <regex>

#include "config/device_spec.h"

namespace pto {

std::vector<int> AttemptTests::charged_cards() const {
  std::vector<int> cards;
  for (const auto& b : breaks)
    if (!std::count(cards.begin(), cards.end(), b.card)) cards.push_back(b.card);
  return cards;
}

namespace {

struct Fault {
  std::string line, pattern;
  std::vector<int> cards;  // the pattern's card group, when it names one
};

template <typename Each>
void each_line(std::string_view text, Each each) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t nl = text.find('\n', at);
    std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    if (!line.empty() && !each(line)) return;
  }
}

// A pattern without regex syntax (pypto's 507018, the poison lines) is found with a plain search: std::regex
// over every line of a thousand failures' output is most of a report's ingest time (bench/bench_ingest).
bool is_literal(const std::string& pattern) { return pattern.find_first_of(".^$|()[]{}*+?\\") == std::string::npos; }

std::string line_at(const std::string& text, std::size_t at) {
  const std::size_t from = text.rfind('\n', at), to = text.find('\n', at);
  const std::size_t begin = from == std::string::npos ? 0 : from + 1;
  return text.substr(begin, std::min<std::size_t>(300, (to == std::string::npos ? text.size() : to) - begin));
}

std::optional<Fault> card_fault_in(const TestCase& c, const HealthConfig& health) {
  std::optional<Fault> found;
  const std::string text = c.message + "\n" + c.output;
  // The first line that names a fault, as a reader of the log would find it.
  std::size_t best = std::string::npos;
  auto consider = [&](std::size_t at, const std::string& pattern, std::vector<int> cards) {
    if (at >= best) return;
    best = at;
    found = Fault{line_at(text, at), pattern, std::move(cards)};
  };
  for (const auto* list : {&health.fault_patterns, &health.poison_patterns})
    for (const auto& fp : *list) {
      if (!fp.re) continue;
      if (is_literal(fp.pattern) && fp.card_group == 0) {
        if (std::size_t at = text.find(fp.pattern); at != std::string::npos) consider(at, fp.pattern, {});
        continue;
      }
      each_line(text, [&](std::string_view line) {
        const std::string l(line.substr(0, 4096));
        std::smatch m;
        if (std::regex_search(l, m, *fp.re)) {
          std::vector<int> cards;
          if (fp.card_group > 0 && m[fp.card_group].matched) {
            try {
              cards = {std::stoi(m[fp.card_group].str())};
            } catch (...) {
            }
          }
          consider(static_cast<std::size_t>(line.data() - text.data()), fp.pattern, cards);
          return false;
        }
        return true;
      });
    }
  if (std::size_t at = text.find("PYPTO_EXEC_RESULT=INFRA"); at != std::string::npos) consider(at, "PYPTO_EXEC_RESULT=INFRA", {});
  return found;
}

std::string first_line(const std::string& s) { return s.substr(0, std::min(s.find('\n'), std::size_t{160})); }


}  // namespace

AttemptTests judge_attempt(std::vector<TestCase>& cases, const HealthConfig& health, const std::vector<int>& step_cards,
                           const std::map<std::string, std::vector<int>>& cards_of,
                           const std::map<std::string, std::string>& lease_faults) {
  AttemptTests out;
  std::map<int, std::map<int, std::size_t>> broken;  // process -> card -> index in out.breaks
  for (TestCase& c : cases) {
    if (auto it = cards_of.find(c.id); it != cards_of.end()) c.cards = it->second;
    if (c.result != TestResult::Skipped) ++out.ran;
    if (!is_failure(c.result)) continue;
    std::optional<Fault> fault = card_fault_in(c, health);
    if (auto lf = lease_faults.find(c.id); !fault && lf != lease_faults.end()) fault = Fault{lf->second, "its lease", {}};
    if (c.cards.empty()) c.cards = fault && !fault->cards.empty() ? fault->cards : step_cards;
    // Behind a card this process already saw break: its victim, whatever it says.
    auto& seen = broken[c.process];
    const std::size_t* behind = nullptr;
    for (int card : c.cards)
      if (auto b = seen.find(card); b != seen.end()) behind = &b->second;
    if (behind) {
      CardBreak& b = out.breaks[*behind];
      c.result = TestResult::Victim;
      c.cause = FailureCause::Card;
      c.victim_of = b.test;
      ++b.victims;
      continue;
    }
    if (fault) {
      c.cause = FailureCause::Card;
      c.card_fault = fault->line;
      for (int card : c.cards) {
        seen[card] = out.breaks.size();
        out.breaks.push_back({card, c.id, fault->line, fault->pattern, 0});
      }
      continue;
    }
    c.cause = FailureCause::Code;
    ++out.code_failures;
  }
  return out;
}

TestsSummary summarize_tests(std::vector<TestCase>& all) {
  TestsSummary s;
  std::map<std::string, std::size_t> last;  // id -> index of its latest attempt's case
  std::map<std::string, const TestCase*> first_failure;
  std::vector<std::string> order;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TestCase& c = all[i];
    if (!last.count(c.id)) order.push_back(c.id);
    auto it = last.find(c.id);
    if (it == last.end() || all[it->second].attempt <= c.attempt) last[c.id] = i;
    if (is_failure(c.result) && !first_failure.count(c.id)) first_failure[c.id] = &c;
    if (c.attempt > 1) ++s.rerun;
  }
  // The breakers and their victims, as first seen: "32 victims of T on card 2".
  struct Group {
    std::vector<int> cards;
    int victims = 0, recovered = 0;
    bool breaker_recovered = false;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> group_order;
  std::vector<std::string> code_failed, muted;
  for (const std::string& id : order) {
    TestCase& fin = all[last[id]];
    const TestCase* ff = first_failure.count(id) ? first_failure[id] : nullptr;
    if (ff && !ff->card_fault.empty() && !groups.count(id)) group_order.push_back(id), groups[id].cards = ff->cards;
    if (ff && ff->result == TestResult::Victim) {
      if (!groups.count(ff->victim_of)) group_order.push_back(ff->victim_of);
      Group& g = groups[ff->victim_of];
      if (g.cards.empty()) g.cards = ff->cards;
      ++g.victims;
      if (!is_failure(fin.result)) ++g.recovered;
    }
    if (ff && !ff->card_fault.empty() && !is_failure(fin.result)) groups[id].breaker_recovered = true;
    switch (fin.result) {
      case TestResult::Muted:
        ++s.muted;
        s.done.insert(id);
        muted.push_back(id);
        break;
      case TestResult::Passed:
        ++s.passed;
        s.done.insert(id);
        if (ff && ff->cause == FailureCause::Code) {
          fin.cause = FailureCause::Flaky;
          ++s.flaky;
        } else if (ff) {
          ++s.recovered;
        }
        break;
      case TestResult::Skipped:
        ++s.skipped;
        s.done.insert(id);
        break;
      case TestResult::Victim:
        ++s.victims;
        s.unresolved.push_back(id);
        break;
      default:
        ++s.failed;
        s.unresolved.push_back(id);
        if (fin.cause != FailureCause::Card) {
          s.code_failure = true;
          code_failed.push_back(id);
        }
    }
    if (fin.result != TestResult::Skipped) ++s.ran;
  }
  std::vector<std::string> parts;
  if (!code_failed.empty()) {
    const TestCase& c = all[last[code_failed.front()]];
    parts.push_back(std::to_string(code_failed.size()) + " failed (" + c.id + (c.message.empty() ? "" : ": " + first_line(c.message)) +
                    (code_failed.size() > 1 ? ", and " + std::to_string(code_failed.size() - 1) + " more" : "") + ")");
  }
  for (const std::string& breaker : group_order) {
    const Group& g = groups[breaker];
    std::string p = std::to_string(g.victims) + (g.victims == 1 ? " victim of " : " victims of ") + breaker + " on " + cards_phrase(g.cards);
    if (g.victims > 0 && g.recovered == g.victims) p += g.victims == 1 ? ", which passed on other cards" : ", all passed on other cards";
    else if (g.recovered > 0) p += ", " + std::to_string(g.recovered) + " passed on other cards";
    if (g.breaker_recovered) p += " (" + breaker + " itself passed there)";
    parts.push_back(p);
  }
  if (!muted.empty()) {
    const TestCase& c = all[last[muted.front()]];
    parts.push_back(std::to_string(muted.size()) + " muted failure" + (muted.size() > 1 ? "s" : "") + " (" + c.id + ": " + c.muted +
                    (muted.size() > 1 ? ", and " + std::to_string(muted.size() - 1) + " more" : "") + ")");
  }
  if (s.flaky > 0) parts.push_back(std::to_string(s.flaky) + " flaky (failed, then passed on the same commit)");
  for (std::size_t i = 0; i < parts.size(); ++i) s.verdict += (i ? "; " : "") + parts[i];
  return s;
}

std::map<std::string, std::vector<int>> device_lines(std::string_view log) {
  std::map<std::string, std::vector<int>> out;
  each_line(log, [&](std::string_view line) {
    const std::size_t at = line.find("[DEVICE] ");
    if (at == std::string_view::npos) return true;
    std::string_view rest = line.substr(at + 9);
    const std::size_t arrow = rest.rfind(" -> device ");
    if (arrow == std::string_view::npos) return true;
    const std::string id(rest.substr(0, arrow));
    const std::string num(rest.substr(arrow + 11));
    char* end = nullptr;
    long card = std::strtol(num.c_str(), &end, 10);
    if (end == num.c_str() || card < 0 || card > 4095 || id.empty()) return true;
    auto& cards = out[id];
    if (!std::count(cards.begin(), cards.end(), static_cast<int>(card))) cards.push_back(static_cast<int>(card));
    return true;
  });
  return out;
}

}  // namespace pto
