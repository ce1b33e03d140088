#pragma once
// A step's result key (SPEC "Nothing run twice"): what its result depends on, hashed. Two steps with the same
// key run the same command on the same files with the same inputs from outside, so a green result of one
// stands in for the other. Its parts: the canonical step key (what dedupe compares: command, env, shell,
// working directory, cards, card type), the git tree of its inputs (the commit's whole tree, or of the files
// its `reuse.inputs` globs name), its job's env, the outputs of the jobs its job needs (a job that fetches
// from outside says what it fetched), the toolchain pin, the host's environment that reaches it (pto-runner's
// own per-run variables aside) and the card type.
#include <map>
#include <string>
#include <vector>

#include "testcases/case_result.h"

namespace pto {

/// A green result a step may be reused from: where it came from and what a later run needs of it.
struct ReusableResult {
  std::string key, scope;  // scope: its run's (caches/cache_tiers CacheScope: protected, pr-N, ref-..., local)
  std::string run, step, label;  // step: its id in its run ("2-3"); label: "job / step"
  std::string log;               // its log's API path
  double finished = 0;           // seconds since the epoch
  double card_seconds = 0;       // cards times seconds it ran: what reusing it saves
  std::map<std::string, std::string> outputs;
  std::vector<TestCase> tests;  // its test cases (a step with `tests:`), shown again where it is reused
};

struct ResultKeyParts {
  std::string step_key;
  std::string inputs_tree;
  std::map<std::string, std::string> job_env;
  std::map<std::string, std::map<std::string, std::string>> needs_outputs;  // job -> its outputs
  std::string toolchain;
  std::map<std::string, std::string> host_env;
  std::string card_type;
};

/// The key (64 hex digits). Host variables that name the run rather than its inputs (PTO_RUNNER_*, GITHUB_*,
/// RUNNER_*) are left out, so a pull request's run and main's run of one tree have the same key.
std::string result_key(const ResultKeyParts& parts);

/// The inputs' tree of a commit checked out in `worktree` (globs as git's `:(glob)` pathspecs, `!GLOB` leaves
/// files out): the commit's tree id for no globs, else a digest of
/// `git ls-files --stage` of the files the globs name (a fresh checkout's index is its commit). "" (and `error`) when git cannot say: the step is not reused.
std::string inputs_tree(const std::string& worktree, const std::vector<std::string>& globs, std::string& error);

/// The globs as one text (the map key of a run's input trees).
std::string globs_text(const std::vector<std::string>& globs);

}  // namespace pto
