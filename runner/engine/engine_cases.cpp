// RunEngine's part in "every test case known" (docs/maintainers.md, "Test results"): a step with `tests:` gets
// a report directory per attempt (and pytest steps the plugin), its reports are read when the attempt ends and
// judged (testcases/verdict), its card breakers charged once, and a failed attempt reruns only the tests
// not yet passed, on other cards than the ones they broke. The rest of the state machine is engine/engine.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "config/device_spec.h"
#include "engine/attempt_facts.h"
#include "engine/engine.h"
#include "sandbox/run_tree.h"
#include "testcases/junit_reader.h"
#include "testcases/pytest_plugin.h"
#include "testcases/report_files.h"
#include "testcases/mutes.h"
#include "testcases/shard_split.h"
#include "util/ids.h"
#include "util/process_env.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

// Reports are hostile input read by root: capped per file and in number.
constexpr std::size_t kMaxReportBytes = 64u << 20;
constexpr std::size_t kMaxReports = 1000;
// A split step's collected test ids (one line each: pypto's ~750 take 60 KB), read on the engine thread.
constexpr std::size_t kMaxCollectedBytes = 16u << 20;

std::string report_dir(const std::string& run_dir, std::size_t j, std::size_t s, int attempt) {
  return run_test_reports(run_dir) + "/" + StepId{j, s}.text() + "-" + std::to_string(attempt);
}


}  // namespace

std::string RunEngine::prepare_tests(std::size_t j, std::size_t s, StepLaunch& l) {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  StepRecord& sr = run_.jobs[j].steps[s];
  if (!ps.tests.any() || opts_.simulate) return "";
  if (ps.tests.format != TestsSpec::Format::Pytest) l.env.push_back("PTO_RUNNER_TESTS_DIR=" + report_dir(opts_.run_dir, j, s, sr.attempt));
  // Its own directory, the step's user's, in one only root writes: nothing planted there can redirect it.
  const std::string parent = run_test_reports(opts_.run_dir), dir = report_dir(opts_.run_dir, j, s, sr.attempt);
  std::error_code ec;
  fs::create_directories(parent, ec);
  ::chmod(parent.c_str(), 0711);
  fs::remove_all(dir, ec);
  if (::mkdir(dir.c_str(), 0700) != 0) return "cannot create " + dir + ": " + std::strerror(errno);
  if (opts_.run_as && ::chown(dir.c_str(), opts_.run_as->uid, opts_.run_as->gid) != 0)
    return "cannot hand " + dir + " to " + opts_.run_as->name + ": " + std::strerror(errno);
  const std::vector<std::string>& rerun = sr.tests_summary.unresolved;
  if (ps.tests.format == TestsSpec::Format::Pytest) {
    const std::string plugin = run_pytest_plugin(opts_.run_dir);
    if (std::string e = install_pytest_plugin(plugin); !e.empty()) return e;
    PytestRole role;
    role.allow_empty = ps.tests.allow_empty;
    // A list of ids for the plugin: root's, in the plugin's directory (root's, 0755), readable by the step.
    auto id_file = [&](const char* what, const auto& ids) -> std::string {
      const std::string path = plugin + "/" + what + "-" + StepId{j, s}.text() + "-" + std::to_string(sr.attempt);
      std::ofstream out(path, std::ios::trunc);
      for (const std::string& id : ids) out << id << "\n";
      if (!out.flush()) return "";
      ::chmod(path.c_str(), 0644);
      return path;
    };
    if (ps.kind == StepKind::CollectTests) {
      role.collect_dir = dir;  // collect only: its ids are written there, nothing runs
    } else {
      role.report_dir = dir;
      // What already passed or was skipped is deselected: a pytest call the first attempt never reached runs.
      if (sr.tests_rerun && (role.skip_file = id_file("done", sr.tests_summary.done)).empty()) return "cannot write the rerun's list of tests";
      // A shard runs only the tests split onto it; a probe (bisection, control run) only the tests it probes.
      if (ps.shard || !ps.only_tests.empty()) {
        std::vector<std::string> only = ps.shard ? sr.shard_tests : ps.only_tests;
        if (ps.shard && !ps.only_tests.empty())
          only.erase(std::remove_if(only.begin(), only.end(),
                                    [&](const std::string& id) { return std::find(ps.only_tests.begin(), ps.only_tests.end(), id) == ps.only_tests.end(); }),
                     only.end());
        if ((role.only_file = id_file("only", only)).empty()) return "cannot write the list of tests it runs";
      }
    }
    add_pytest_env(l.env, plugin, role);
  } else if (sr.tests_rerun || (!ps.only_tests.empty() && !ps.tests.rerun.empty())) {
    // `rerun: 'CMD {tests}'`: the ids come from the step's own reports (or the probe's); each is one quoted word.
    std::string ids;
    for (const std::string& id : sr.tests_rerun ? rerun : ps.only_tests) ids += (ids.empty() ? "" : " ") + shell_quote(id);
    l.command = ps.tests.rerun;
    for (std::size_t p; (p = l.command.find("{tests}")) != std::string::npos;) l.command.replace(p, 7, ids);
  }
  return "";
}

ReportQuery RunEngine::report_query(std::size_t j, std::size_t s) const {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  const StepRecord& sr = run_.jobs[j].steps[s];
  // Its reports, read beneath a directory the step cannot replace: the attempt's own, or the worktree.
  ReportQuery q;
  q.from_plugin = ps.tests.format == TestsSpec::Format::Pytest;
  q.base = q.from_plugin ? report_dir(opts_.run_dir, j, s, sr.attempt) : opts_.root;
  q.pattern = q.from_plugin ? "*.xml" : (ps.working_directory.empty() ? "" : ps.working_directory + "/") + ps.tests.path;
  q.max_bytes = kMaxReportBytes;
  q.max_files = kMaxReports;
  q.max_total_bytes = opts_.max_report_bytes;
  q.max_cases = opts_.max_report_cases;
  return q;
}

const StepRecord::Failure* RunEngine::take_tests(std::size_t j, std::size_t s, const StepOutcome& o, ParsedReports reports, bool& rerun,
                                                 bool& exit_accounted) {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  StepRecord& sr = run_.jobs[j].steps[s];
  rerun = false;
  exit_accounted = false;
  sr.tests_error.clear();
  std::vector<TestCase> cases = std::move(reports.cases);
  const std::string error = std::move(reports.error);
  auto fail = [&](FailureEvidence ev) -> const StepRecord::Failure* {
    ev.cards = ev.cause == FailureCause::Code ? std::vector<int>{} : ev.cards;
    std::vector<std::string> notes = charge_cards(sr, ev);
    sr.failures.push_back({sr.attempt, attempt_cards(sr), ev, notes, ""});
    return &sr.failures.back();
  };
  if (!error.empty()) {
    // A report that cannot be trusted (a link, a FIFO, too big, too many, malformed): the step's own doing, as
    // a pull request's code wrote it, never a crash; its cases are dropped. Not the host's: a pull request must
    // not raise infra failures, page on-call or mark a card bad through its reports (SPEC, fifth stage).
    sr.tests_error = error;
    FailureEvidence ev;
    ev.cause = FailureCause::Code;
    ev.reason = "report refused: " + error;
    return fail(ev);
  }
  std::map<std::string, std::vector<int>> cards_of = device_lines(attempt_log(sr.log_path));
  for (const auto& [test, cards] : sr.test_leases) cards_of[test] = cards;
  AttemptTests judged = judge_attempt(cases, opts_.health, attempt_cards(sr), cards_of, sr.test_lease_faults);
  MutedCount muted;
  if (opts_.muted) {
    muted = mute_failures(cases, opts_.muted);
    judged.code_failures -= muted.code;
  }
  // What the tests printed served the judgement above and nothing after (no view shows it, a later attempt is
  // judged by its own): not kept, so no copy of the step's record (its state journaled at every transition,
  // the run's JSON) carries up to 16 MiB of it.
  for (TestCase& c : cases) {
    c.attempt = sr.attempt;
    std::string().swap(c.output);
  }
  sr.tests.insert(sr.tests.end(), std::make_move_iterator(cases.begin()), std::make_move_iterator(cases.end()));
  sr.tests_summary = summarize_tests(sr.tests);
  if (judged.ran == 0 && !sr.tests_rerun && !ps.tests.allow_empty) {
    FailureEvidence ev;
    ev.reason = "ran no tests";
    ev.reason += ps.tests.format == TestsSpec::Format::Pytest ? " (no pytest process of it ran a test)"
                                                              : " (no report matching " + ps.tests.path + " names a test that ran)";
    sr.error = ev.reason;
    return fail(ev);
  }
  if (o.ok()) return nullptr;  // green by its exit
  // The cards its tests broke are charged once each, whatever else failed; the attempt's cause is the code's
  // when a test failed by itself.
  FailureEvidence card;
  card.cause = FailureCause::Card;
  for (const CardBreak& b : judged.breaks) {
    if (std::count(card.cards.begin(), card.cards.end(), b.card)) continue;
    card.cards.push_back(b.card);
    card.pattern = b.pattern;
    card.matched_line = b.line;
  }
  // Its exit says tests failed (pytest's 1; a JUnit step's runner any code), and every failure left is muted:
  // green, with the muted failures shown (and a card a muted test broke still charged).
  const bool tests_failed_exit = o.signal == 0 && (ps.tests.format == TestsSpec::Format::Pytest ? o.exit_code == 1 : o.exit_code > 0);
  if (muted.muted > 0 && sr.tests_summary.unresolved.empty() && tests_failed_exit) {
    if (!card.cards.empty()) charge_cards(sr, card);
    exit_accounted = true;
    return nullptr;
  }
  if (!judged.failed()) return nullptr;  // red for what its log says
  FailureEvidence ev = card;
  int victims = 0;
  for (const CardBreak& b : judged.breaks) victims += b.victims;
  std::string broke;
  for (const CardBreak& b : judged.breaks)
    if (broke.find(b.test) == std::string::npos) broke += (broke.empty() ? "" : ", ") + b.test;
  ev.reason = judged.breaks.empty() ? ""
                                    : std::to_string(victims) + (victims == 1 ? " victim of " : " victims of ") + broke + " on " +
                                          cards_phrase(card.cards) + " (" + card.matched_line + ")";
  if (judged.code_failures > 0) {
    std::string first;
    for (const TestCase& c : sr.tests)
      if (c.attempt == sr.attempt && c.cause == FailureCause::Code) {
        first = c.id + (c.message.empty() ? "" : ": " + c.message.substr(0, c.message.find('\n')));
        break;
      }
    ev.cause = FailureCause::Code;
    ev.reason = std::to_string(judged.code_failures) + " failed (" + first + ")" + (ev.reason.empty() ? "" : ", " + ev.reason);
  }
  std::vector<std::string> notes = charge_cards(sr, card);
  ev.cards = card.cards;
  sr.failures.push_back({sr.attempt, attempt_cards(sr), ev, notes, ""});
  const bool can_select = ps.tests.format == TestsSpec::Format::Pytest || !ps.tests.rerun.empty();
  rerun = can_select && ps.retry.reruns_tests(sr.attempt) &&
          static_cast<int>(sr.tests_summary.unresolved.size()) <= ps.retry.max_tests && !sr.tests_summary.unresolved.empty();
  return &sr.failures.back();
}

std::string RunEngine::take_collection(std::size_t j, std::size_t s) {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  StepRecord& sr = run_.jobs[j].steps[s];
  // Written by the step's pytest processes (collected-PID-N.txt): hostile input, read as reports are.
  CollectedReports found =
      collect_reports(report_dir(opts_.run_dir, j, s, sr.attempt), "collected-*.txt", kMaxReportBytes, kMaxReports, kMaxCollectedBytes);
  if (!found.error.empty()) return "its collected tests were refused: " + found.error;
  std::vector<std::string> ids;
  for (FoundReport& f : found.files) {
    std::istringstream in(read_report(f).text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) ids.push_back(line);
  }
  if (ids.empty() && !ps.tests.allow_empty) return "collected no tests (no pytest process of it collected a test)";
  const std::map<std::string, double> learned = opts_.test_seconds ? opts_.test_seconds(ids) : std::map<std::string, double>{};
  TestShards split = split_by_duration(ids, learned, ps.split_shards);
  sr.collected = 0;
  for (const auto& shard : split.tests) sr.collected += static_cast<int>(shard.size());
  sr.collected_unknown = split.unknown;
  std::ostringstream line;
  line << "pto-runner: collected " << sr.collected << " test(s); split into " << ps.split_shards << " shards by learned durations ("
       << split.unknown << " without one, counted at the median of the others); expected seconds per shard:";
  for (std::size_t k = 0; k < plan_.jobs[j].steps.size(); ++k) {
    PlanStep& shard = plan_.jobs[j].steps[k];
    if (shard.collect_step != static_cast<int>(s) || shard.shard < 1 || shard.shard > ps.split_shards) continue;
    StepRecord& r = run_.jobs[j].steps[k];
    const std::size_t i = static_cast<std::size_t>(shard.shard - 1);
    r.shard_tests = std::move(split.tests[i]);
    r.shard_expected_seconds = split.expected_seconds[i];
    line << " " << std::fixed << std::setprecision(1) << r.shard_expected_seconds;
    // Its estimate for the queue: the sum of its tests' learned durations, once some are known.
    if (split.unknown < sr.collected) {
      shard.expected_minutes = std::max(r.shard_expected_seconds, 1.0) / 60;
      shard.expected_defaulted = false;
      shard.expected_source = "tests";
      shard.expected_samples = sr.collected - split.unknown;
    }
  }
  std::ofstream(sr.log_path, std::ios::app) << line.str() << "\n";
  return "";
}

std::string RunEngine::shard_unrunnable(std::size_t j, std::size_t s) const {
  const PlanStep& ps = plan_.jobs[j].steps[s];
  const StepRecord& collect = run_.jobs[j].steps[static_cast<std::size_t>(ps.collect_step)];
  if (collect.state != StepState::Succeeded)
    return "not run: its tests were not collected (" + plan_.jobs[j].steps[static_cast<std::size_t>(ps.collect_step)].name + " " +
           to_string(collect.state) + ")";
  const std::vector<std::string>& mine = run_.jobs[j].steps[s].shard_tests;
  if (!opts_.simulate && mine.empty())
    return "not run: no test fell to this shard (" + std::to_string(collect.collected) + " tests in " + std::to_string(ps.shard_count) + " shards)";
  // A probe of some tests (a bisection's, a control run's): a shard that holds none of them has nothing to run.
  if (!opts_.simulate && !ps.only_tests.empty() &&
      std::none_of(mine.begin(), mine.end(), [&](const std::string& id) { return std::count(ps.only_tests.begin(), ps.only_tests.end(), id) > 0; }))
    return "not run: none of the probed tests fell to this shard";
  return "";
}

void RunEngine::settle_tests_verdict(std::size_t j, std::size_t s, StepState to) {
  StepRecord& sr = run_.jobs[j].steps[s];
  if (!plan_.jobs[j].steps[s].tests.any() || sr.tests.empty() || !sr.tests_error.empty()) return;
  const TestsSummary& t = sr.tests_summary;
  if (to == StepState::Succeeded) {
    if (t.verdict.empty()) return;
    // Its command exited 0 with tests failed (`pytest || true`): green as it said, and the failures shown.
    sr.verdict = (t.unresolved.empty() ? "passed: " : "passed (its command exited 0): ") + t.verdict;
    sr.cause = t.flaky > 0 ? "flaky" : t.recovered > 0 ? "card" : sr.cause;
  } else if (!t.unresolved.empty()) {
    sr.verdict = "failed: " + t.verdict;
    sr.cause = t.code_failure ? "code" : "card";
  }
}

}  // namespace pto
