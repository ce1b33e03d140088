#pragma once
// Judging a step's test cases (SPEC "Test results", "Rerun only what failed"). Pure: told the cases, the
// host's health patterns and which cards each test used; says which failures are the commit's, which broke a
// card, which are that card's victims, what a retry must rerun, and the line a person reads.
//
// One attempt: a test's cards are what its lease (task-submit from inside the test) or the log's `[DEVICE] ID -> device N` line says, else what
// its report names (the plugin's `pto.cards`, from `device=N` in its output), else a fault pattern's card
// group, else the step's cards. A failure whose message or output matches a `health.fault-patterns` entry, a
// harness `PYPTO_EXEC_RESULT=INFRA` marker or a `health.poison-patterns` line, or whose lease failed by its
// card, broke its card(s): cause card.
// Every later failure on such a card in the same process is its victim (result victim, cause card): the card
// is charged once, for the test that broke it, never the commit.
//
// Across attempts: a test's last attempt is its result. One that failed with cause code and then passed is
// flaky; a victim or breaker that passed on other cards is recovered. The step is accounted for when no
// test's last result is a failure.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/runner_config.h"
#include "testcases/case_result.h"

namespace pto {

/// A card a test broke in one attempt: the test, the line that said so, and the failures behind it.
struct CardBreak {
  int card = 0;
  std::string test;
  std::string line;
  std::string pattern;
  int victims = 0;
};

struct AttemptTests {
  int ran = 0;  // cases that ran (not skipped)
  int code_failures = 0;
  std::vector<CardBreak> breaks;
  std::vector<int> charged_cards() const;
  bool failed() const { return code_failures > 0 || !breaks.empty(); }
};

/// Judges one attempt's `cases` (in report order) in place. `cards_of`: a test's cards where its leases or
/// the log named them; `lease_faults`: tests whose leased command failed by its card (the line saying so).
AttemptTests judge_attempt(std::vector<TestCase>& cases, const HealthConfig& health, const std::vector<int>& step_cards,
                           const std::map<std::string, std::vector<int>>& cards_of,
                           const std::map<std::string, std::string>& lease_faults = {});

struct TestsSummary {
  int ran = 0, passed = 0, failed = 0, victims = 0, skipped = 0, flaky = 0, recovered = 0, rerun = 0, muted = 0;
  std::set<std::string> done;           // passed, skipped or muted at their last attempt: a rerun deselects them
  std::vector<std::string> unresolved;  // failed, error or victim at their last attempt (first-seen order)
  bool code_failure = false;            // an unresolved failure is the commit's
  std::string verdict;                  // "1 failed, 32 victims of T on card 2 (passed on cards 0,1,3)"
};

/// Every attempt's cases of one step: marks flaky passes in place and sums up.
TestsSummary summarize_tests(std::vector<TestCase>& all);

/// `[DEVICE] NODEID -> device N` lines (pypto's conftest prints one per test to the real terminal).
std::map<std::string, std::vector<int>> device_lines(std::string_view log);

}  // namespace pto
