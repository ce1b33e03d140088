#include "lint/lint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "testcases/mutes.h"

namespace fs = std::filesystem;

namespace pto {

namespace {

struct Place {
  std::string file;
  int line = 0, col = 0;
};

// Parses "FILE:LINE:COL" as written by plan.cpp.
Place parse_place(const std::string& s) {
  Place p;
  auto c2 = s.rfind(':');
  auto c1 = c2 == std::string::npos ? std::string::npos : s.rfind(':', c2 - 1);
  if (c1 == std::string::npos) {
    p.file = s;
    return p;
  }
  p.file = s.substr(0, c1);
  p.line = std::atoi(s.substr(c1 + 1, c2 - c1 - 1).c_str());
  p.col = std::atoi(s.substr(c2 + 1).c_str());
  return p;
}

}  // namespace

void lint_duplicate_steps(const Plan& plan, Diagnostics& diags) {
  std::set<std::string> seen;  // matrix legs repeat the same finding
  for (const auto& job : plan.jobs)
    for (const auto& s : job.steps) {
      if (!s.deduplicated_from) continue;
      const PlanStep& first = job.steps[*s.deduplicated_from];
      // Point at the place that made the copy: a repeated example line, or a repeated `models:` entry / step.
      const std::string& at = s.source != first.source ? s.source : s.origin;
      const std::string& orig = s.source != first.source ? first.source : first.origin;
      Place p = parse_place(at);
      std::string msg = "step '" + s.name + "' in job '" + job.name + "' does the same work as '" + first.name +
                        "' at " + orig + "; it will be deduplicated (not run)";
      if (seen.insert(at + msg).second) diags.warning(p.file, p.line, p.col, "duplicate-step", msg);
    }
}

void lint_duplicate_steps(const Workflow& wf, Diagnostics& diags) {
  for (const auto& job : wf.jobs) {
    std::map<std::string, const WorkflowStep*> first;
    for (const auto& s : job.steps) {
      if (!s.has_body) continue;
      auto [it, fresh] = first.emplace(s.key, &s);
      if (fresh) continue;
      const WorkflowStep& o = *it->second;
      auto label = [](const WorkflowStep& st) { return st.name.empty() ? std::string("(unnamed)") : "'" + st.name + "'"; };
      diags.warning(wf.file, s.loc.line, s.loc.col, "duplicate-step",
                    "step " + label(s) + " in job '" + job.id + "' (line " + std::to_string(s.loc.line) +
                        ") duplicates step " + label(o) + " at " + wf.file + ":" + std::to_string(o.loc.line) + ":" +
                        std::to_string(o.loc.col) + " (same run/uses/with/env/working-directory/shell)");
    }
  }
}

void lint_inline_literals(const std::string& path, const std::string& display, Diagnostics& diags) {
  static const std::regex sha_re(R"(PTOAS_SHA256(_[A-Z0-9_]+)?\s*[:=]\s*['"]?[0-9a-f]{64}\b)");
  static const std::regex checkout_re(R"(git\s+checkout\s+['"]?[0-9a-f]{40}\b)");
  std::ifstream in(path);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    // libstdc++'s std::regex recurses per character, so it only ever sees a short window after an anchor
    // found with find(): a megabyte-long line cannot exhaust the stack.
    auto scan = [&](const std::string& anchor, const std::regex& re, const char* message) {
      for (std::size_t pos = line.find(anchor); pos != std::string::npos; pos = line.find(anchor, pos + 1)) {
        std::string window = line.substr(pos, 160);
        if (std::regex_search(window, re, std::regex_constants::match_continuous)) {
          diags.error(display, lineno, static_cast<int>(pos) + 1, "inline-toolchain-literal", message);
          return;
        }
      }
    };
    scan("PTOAS_SHA256", sha_re,
         "PTOAS sha256 written inline; take it from toolchain/versions.env (the lead job exports $PTOAS_SHA256; "
         "workflows read `pto-runner toolchain outputs`)");
    scan("git", checkout_re, "commit pinned inline by `git checkout <40 hex>`; keep pins in toolchain/versions.env");
  }
}

namespace {

/// Whether an expression reads a value a pull request's author (or whoever calls the workflow) can choose:
/// GitHub's list of untrusted input (issue, pull request, discussion titles and bodies; comment and review
/// bodies; commit messages and author names and emails; head branches and labels; page names; a workflow
/// run's head branch and commits), the whole `github` or `github.event` object (toJSON), and `inputs.*`
/// (whoever calls a reusable workflow or dispatches it picks them). The rest of `github.*` (base_ref,
/// event_name, sha, ref, repository, run_id, actor, ...) is set by GitHub or the repository.
bool reads_untrusted(std::string inner) {
  // `commits[0].message`, `commits.*.message` and `pages[2].page_name` alike.
  static const std::regex index_re(R"(\[[^\]]*\]|\.\*)");
  inner = std::regex_replace(inner, index_re, ".N");
  static const std::regex untrusted_re(
      R"((^|[^A-Za-z0-9_.])()"
      R"(inputs\.|github\.head_ref\b|)"
      R"(github\.event\.(issue|pull_request|discussion)\.(title|body)\b|)"
      R"(github\.event\.(comment|review|review_comment)\.body\b|)"
      R"(github\.event\.pages\.N\.page_name\b|)"
      R"(github\.event\.(commits\.N|head_commit)\.(message|(author|committer)\.(email|name))\b|)"
      R"(github\.event\.pull_request\.(head\.(ref|label|repo\.default_branch)|default_branch)\b|)"
      R"(github\.event\.workflow_run\.(head_branch|display_title|head_commit\.(message|(author|committer)\.(email|name))|pull_requests\.N\.head\.ref)\b|)"
      R"(github\.event\s*(\)|,|$)|github\s*(\)|,|$)))");
  return std::regex_search(inner, untrusted_re);
}

}  // namespace

void lint_script_injection(const Workflow& wf, Diagnostics& diags) {
  static const std::regex expr_re(R"(\$\{\{([^}]*)\}\})");
  for (const auto& job : wf.jobs)
    for (const auto& s : job.steps) {
      for (auto it = std::sregex_iterator(s.run.begin(), s.run.end(), expr_re); it != std::sregex_iterator(); ++it) {
        if (!reads_untrusted((*it)[1].str())) continue;
        std::size_t pos = static_cast<std::size_t>(it->position());
        int line_in_run = static_cast<int>(std::count(s.run.begin(), s.run.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
        std::size_t line_start = s.run.rfind('\n', pos == 0 ? 0 : pos - 1);
        int col_in_line = static_cast<int>(pos - (line_start == std::string::npos || pos == 0 ? 0 : line_start + 1));
        // A block scalar's text starts on the line after `run: |`, indented; a plain one right at the mark.
        int line = s.run_loc.line + (s.run_is_block ? 1 : 0) + line_in_run;
        int col = (s.run_is_block || line_in_run > 0 ? s.loc.col + 2 : s.run_loc.col) + col_in_line;
        diags.error(wf.file, line, col, "script-injection",
                    "job '" + job.id + "': " + it->str() + " is pasted into the shell script before it runs, so its text "
                    "runs as code; set it in the step's env: and use \"$NAME\"");
      }
    }
}

void lint_unused_models(const Project& project, Diagnostics& diags) {
  std::set<std::string> used;
  for (const auto& job : project.jobs)
    for (const auto& s : job.steps) used.insert(s.models.begin(), s.models.end());
  for (const auto& [id, mf] : project.models)
    if (!used.count(id))
      diags.warning(mf.file, mf.loc.line ? mf.loc.line : 1, mf.loc.col ? mf.loc.col : 1, "unused-model",
                    "no job runs model '" + id + "' (no `models: [" + id + "]` in jobs/); its examples never run");
}

namespace {

std::string collapse_spaces(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
    } else {
      if (space) out += ' ';
      out += c;
      space = false;
    }
  }
  return out;
}

// The command a step exists to run: the last piece of its last line (after `&&` or `;`), spaces collapsed.
// Definitions may set up the environment differently (PYTHONPATH, which activate.sh) and still run the same
// program with the same flags; that program line is what must not drift.
std::string program_line(const std::string& run) {
  std::string joined = run;  // a line continued with a backslash is one line
  for (std::size_t p; (p = joined.find("\\\n")) != std::string::npos;) joined.replace(p, 2, " ");
  std::string last;
  std::istringstream lines(joined);
  for (std::string line; std::getline(lines, line);)
    if (!collapse_spaces(line).empty()) last = line;
  for (const char* sep : {"&&", ";"})
    if (auto p = last.rfind(sep); p != std::string::npos) last = last.substr(p + std::string(sep).size());
  return collapse_spaces(last);
}

// The words where two program lines differ (their common first and last words left out): "'a' in ..., 'b' at".
std::pair<std::string, std::string> differing_words(const std::string& a, const std::string& b) {
  auto words = [](const std::string& s) {
    std::vector<std::string> w;
    std::istringstream in(s);
    for (std::string x; in >> x;) w.push_back(x);
    return w;
  };
  std::vector<std::string> x = words(a), y = words(b);
  std::size_t head = 0;
  while (head < x.size() && head < y.size() && x[head] == y[head]) ++head;
  std::size_t tail = 0;
  while (tail < x.size() - head && tail < y.size() - head && x[x.size() - 1 - tail] == y[y.size() - 1 - tail]) ++tail;
  auto join = [](const std::vector<std::string>& w, std::size_t from, std::size_t to, bool more_before, bool more_after) {
    std::string out = more_before ? "... " : "";
    for (std::size_t i = from; i < to; ++i) out += (i > from ? " " : "") + w[i];
    if (from == to) out += "(nothing)";
    return out + (more_after ? " ..." : "");
  };
  return {join(x, head, x.size() - tail, head > 0, tail > 0), join(y, head, y.size() - tail, head > 0, tail > 0)};
}

std::string minutes(const std::optional<double>& m) {
  if (!m) return "none";
  std::ostringstream os;
  os << *m << " min";
  return os.str();
}

}  // namespace

void lint_drift(const ImportResult& wf, const std::string& display, const Project& project, const Plan& plan,
                Diagnostics& diags) {
  (void)project;
  std::map<std::string, const PlanJob*> jobs;
  std::map<const PlanStep*, const PlanJob*> job_of;
  for (const auto& j : plan.jobs) {
    jobs[j.name] = &j;
    for (const auto& ps : j.steps) job_of[&ps] = &j;
  }
  // Jobs that belong in the definitions: NPU work (they must have one), and any job that has one by name. CPU
  // jobs without a definition stay in GitHub Actions and are not drift.
  std::set<std::string> compared;
  std::map<std::string, const ImportedJob*> wf_jobs;
  // A job that already submits to pto-runner (`pto-runner submit --job NAME`, as `import --emit-workflow` writes
  // it) runs the definitions themselves: nothing of it can drift, but the jobs it names must exist.
  std::map<std::string, std::set<std::string>> submits;
  static const std::regex submit_job(R"(pto-runner\s+submit\b[^\n]*?--job[ =]([A-Za-z0-9_.-]+))");
  for (const auto& s : wf.steps)
    for (std::sregex_iterator m(s.run.begin(), s.run.end(), submit_job), e; m != e; ++m) submits[s.job].insert((*m)[1].str());
  for (const auto& j : wf.jobs) {
    wf_jobs[j.id] = &j;
    if (auto sub = submits.find(j.id); sub != submits.end()) {
      for (const auto& name : sub->second)
        if (!jobs.count(name))
          diags.error(display, j.line, j.col, "drift", "job '" + j.id + "' submits job '" + name + "', which the definitions do not have");
      continue;
    }
    if (jobs.count(j.id)) compared.insert(j.id);
    else if (j.npu) diags.error(display, j.line, j.col, "drift", "NPU job '" + j.id + "' has no definition (jobs/" + j.id + ".yml)");
    else if (j.simulator)
      diags.error(display, j.line, j.col, "drift", "job '" + j.id + "' runs the cards' simulators but has no definition (jobs/" + j.id + ".yml)");
  }
  // A workflow step is found in its own job's definition by name, then by program line (a renamed model
  // example); only then in the other jobs, by name (a step moved to a job of its own: pypto's clone of
  // pypto-lib) and by program line. Its own job first, so a common name ("Run tests") never matches another's.
  auto find = [&](const ImportedStep& s) -> const PlanStep* {
    const std::string want = program_line(s.run);
    auto in = [&](const PlanJob& j, bool by_name) -> const PlanStep* {
      for (const auto& ps : j.steps)
        if (by_name ? ps.name == s.name : (!want.empty() && program_line(ps.run) == want)) return &ps;
      return nullptr;
    };
    auto own = jobs.find(s.job);
    for (bool by_name : {true, false})
      if (own != jobs.end())
        if (const PlanStep* ps = in(*own->second, by_name)) return ps;
    for (bool by_name : {true, false})
      for (const auto& j : plan.jobs)
        if (j.name != s.job)
          if (const PlanStep* ps = in(j, by_name)) return ps;
    return nullptr;
  };
  for (const auto& j : wf.jobs)
    if (compared.count(j.id))
      for (const auto& [k, v] : j.env) {
        const PlanJob& pj = *jobs[j.id];
        auto d = pj.env.find(k);
        if (d != pj.env.end() && d->second == v) continue;
        diags.error(display, j.line, j.col, "drift",
                    "job '" + j.id + "': env " + k + " is '" + v + "' in the workflow, " + (d == pj.env.end() ? "not set" : "'" + d->second + "'") +
                        " in its definition (jobs/" + j.id + ".yml)");
      }
  std::set<const PlanStep*> matched;
  for (const auto& s : wf.steps) {
    if (!compared.count(s.job)) continue;
    const std::string what = "step '" + s.name + "' of job '" + s.job + "'";
    const PlanStep* ps = find(s);
    if (!ps) {
      // Work on cards that the definitions do not do is drift; a setup step left out may be deliberate.
      if (s.task_submit) diags.error(display, s.line, s.col, "drift", what + " runs on cards through task-submit; no step of the definitions runs it");
      else diags.warning(display, s.line, s.col, "drift", what + " is not in the definitions");
      continue;
    }
    matched.insert(ps);
    auto differ = [&](const std::string& field, const std::string& in_workflow, const std::string& in_definitions) {
      diags.error(display, s.line, s.col, "drift",
                  what + ": " + field + " is " + in_workflow + " in the workflow, " + in_definitions + " at " + ps->source);
    };
    if (s.task_submit && s.devices != ps->devices) differ("cards (task-submit --device-num)", std::to_string(s.devices), std::to_string(ps->devices));
    if (s.task_submit && s.run_timeout_minutes != ps->run_timeout_minutes)
      differ("the run's limit (task-submit --max-time, run-timeout-minutes)", minutes(s.run_timeout_minutes), minutes(ps->run_timeout_minutes));
    if (s.task_submit && s.queue_timeout_minutes != ps->queue_timeout_minutes)
      differ("the wait for cards (task-submit --timeout, queue-timeout-minutes)", minutes(s.queue_timeout_minutes), minutes(ps->queue_timeout_minutes));
    if (s.timeout_minutes && s.timeout_minutes != ps->timeout_minutes)
      differ("timeout-minutes", minutes(s.timeout_minutes), minutes(ps->timeout_minutes));
    // The card type its runner labels name: `npu-X` is X; the plain `npu` is pypto's a2a3 host (a typed step
    // elsewhere is drift: a runs-on changed from npu-a5 to npu). An untyped definition under plain `npu` is not.
    if (const ImportedJob* j = wf_jobs[s.job]; j && s.task_submit) {
      const std::string wf_type = !j->card_type.empty() ? j->card_type : j->bare_npu ? "a2a3" : "";
      if (!wf_type.empty() && ps->device_type != wf_type && !(j->card_type.empty() && ps->device_type.empty()))
        differ("the card type (runs-on " + j->runs_on + ")", wf_type, ps->device_type.empty() ? "any" : ps->device_type);
    }
    // Env values: a variable the step's own `env:` gives it that the definitions set otherwise (the step's or
    // its job's), or not at all. The job's `env:` is compared once, at the job.
    if (const PlanJob* pj = job_of[ps]) {
      std::map<std::string, std::string> defined = ps->env;
      defined.insert(pj->env.begin(), pj->env.end());
      for (const auto& [k, v] : s.env) {
        auto d = defined.find(k);
        if (d == defined.end()) differ("env " + k, "'" + v + "'", "not set");
        else if (d->second != v) differ("env " + k, "'" + v + "'", "'" + d->second + "'");
      }
    }
    // Setup lines: what the step unsets (pypto: PTO2_RING_* for HCCL), by its own lines or by its job's local
    // composite actions (setup-ci-job's `unset-ring: 'true'` writes the unset into activate.sh).
    {
      std::set<std::string> in_workflow = unset_names(s.run, {}), in_definitions = unset_names(ps->run, {});
      std::string via;
      for (const auto& c : wf.composites)
        if (c.job == s.job && !c.unsets.empty()) {
          in_workflow.insert(c.unsets.begin(), c.unsets.end());
          via = c.action;
        }
      std::string only_defs, only_wf;
      for (const auto& n : in_definitions)
        if (!in_workflow.count(n)) only_defs += (only_defs.empty() ? "" : " ") + n;
      for (const auto& n : in_workflow)
        if (!in_definitions.count(n)) only_wf += (only_wf.empty() ? "" : " ") + n;
      if (!only_defs.empty()) differ("unset " + only_defs, "not done", "done");
      if (!only_wf.empty()) differ("unset " + only_wf, "done" + (via.empty() ? std::string() : " (through " + via + ")"), "not done");
    }
    if (program_line(s.run) != program_line(ps->run)) {
      auto [in_workflow, in_definitions] = differing_words(program_line(s.run), program_line(ps->run));
      differ("the command", "'" + in_workflow + "'", "'" + in_definitions + "'");
    }
  }
  // A local composite action's steps are the job's setup in the workflow; the definitions do it their own way
  // (the lead job, a build job). Each is named with a hash of its script, so a baseline that records it as
  // deliberate goes stale, and fails, the day the action's step changes.
  for (const auto& c : wf.composites)
    if (compared.count(c.job))
      for (const auto& st : c.steps)
        diags.warning(display, c.line, c.col, "drift",
                      "step '" + st.name + "' of " + c.action + " (script sha256 " + st.sha + ", job '" + c.job + "') is not in the definitions");
  for (const auto& job : compared)
    for (const auto& ps : jobs[job]->steps)
      if (!matched.count(&ps)) {
        Place at = parse_place(ps.source);
        diags.warning(at.file, at.line, at.col, "drift", "step '" + ps.name + "' of job '" + job + "' is not in " + display);
      }
}

void lint_model_scripts(const Project& project, Diagnostics& diags) {
  for (const auto& [id, m] : project.models) {
    // The script an example runs: the word of the command that holds {dir}/{example} (pypto-lib's
    // `python {dir}/{example}.py ...`). Checked only where the tree has the model's dir: a model whose scripts
    // live in another checkout (pypto-lib beside pypto) is that checkout's to check.
    const std::string placeholder = "{dir}/{example}";
    const auto at = m.command.find(placeholder);
    if (at == std::string::npos || m.dir.empty()) continue;
    const auto end = m.command.find_first_of(" \t\n;&|\"'", at);
    const std::string suffix = m.command.substr(at + placeholder.size(), end == std::string::npos ? std::string::npos : end - at - placeholder.size());
    std::error_code ec;
    const fs::path dir = fs::path(project.root) / m.dir;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& ex : m.examples) {
      const fs::path script = dir / (ex.name + suffix);
      if (!fs::exists(script, ec))
        diags.error(m.file, ex.loc.line, ex.loc.col, "missing-script",
                    "example '" + ex.name + "' runs " + (fs::path(m.dir) / (ex.name + suffix)).string() + ", which does not exist under " + m.dir);
    }
  }
}

void lint_expired_mutes(const RunnerConfig& cfg, const std::string& today, Diagnostics& diags) {
  for (const TestMute& m : cfg.tests.mute)
    if (m.until < today)
      diags.warning(cfg.file, m.line, m.col, "expired-mute",
                    "the mute of '" + m.id + "' ended on " + m.until + " and mutes nothing now: remove it, or give it a new 'until' (" +
                        m.reason + ")");
}

void lint_project_files(const Project& project, const Plan& plan, Diagnostics& diags) {
  lint_duplicate_steps(plan, diags);
  lint_expired_mutes(project.runner, utc_date(), diags);
  lint_unused_models(project, diags);
  lint_model_scripts(project, diags);
  // What could not be checked without a host is said, once, where it was skipped: steps naming a card type.
  std::size_t typed = 0;
  for (const auto& j : plan.jobs)
    for (const auto& st : j.steps) typed += !st.device_type.empty();
  if (project.default_host && project.host_profiles.empty() && typed)
    diags.note("ci/hosts/", 0, 0, "no-host",
               std::to_string(typed) + " step(s) name a card type, and there is no runner.yml, --devices or host profile "
               "(ci/hosts/NAME.yml with a devices: section) to check their types and card counts against: skipped");
  for (const char* dir : {"jobs", "models"}) {
    std::error_code ec;
    fs::path d = fs::path(project.root) / dir;
    if (!fs::is_directory(d, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".yml" || e.path().extension() == ".yaml") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      lint_inline_literals(f.string(), std::string(dir) + "/" + f.filename().string(), diags);
  }
}

}  // namespace pto
