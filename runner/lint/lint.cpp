#include "lint/lint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <algorithm>
#include <regex>
#include <set>

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

void lint_script_injection(const Workflow& wf, Diagnostics& diags) {
  static const std::regex expr_re(R"(\$\{\{([^}]*)\}\})");
  static const std::regex untrusted_re(R"((^|[^A-Za-z0-9_.])(github|inputs)\.)");
  for (const auto& job : wf.jobs)
    for (const auto& s : job.steps) {
      for (auto it = std::sregex_iterator(s.run.begin(), s.run.end(), expr_re); it != std::sregex_iterator(); ++it) {
        std::string inner = (*it)[1].str();
        if (!std::regex_search(inner, untrusted_re)) continue;
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

void lint_drift(const ImportResult& wf, const std::string& display, const Project& project, const Plan& plan,
                Diagnostics& diags) {
  auto norm = [](const std::string& s) {
    std::string out;
    bool space = false;
    for (char c : s) {
      if (std::isspace(static_cast<unsigned char>(c))) space = !out.empty();
      else {
        if (space) out += ' ';
        out += c;
        space = false;
      }
    }
    return out;
  };
  std::set<std::pair<std::string, std::string>> in_workflow;  // (job, run)
  for (const auto& s : wf.steps) {
    in_workflow.insert({s.job, norm(s.run)});
    const PlanJob* job = nullptr;
    for (const auto& j : plan.jobs)
      if (j.name == s.job) job = &j;
    if (!job) {
      diags.error(display, s.line, s.col, "drift", "job '" + s.job + "' has no definition (jobs/" + s.job + ".yml)");
      continue;
    }
    const PlanStep* match = nullptr;
    for (const auto& ps : job->steps)
      if (norm(ps.run) == norm(s.run)) match = &ps;
    if (!match)
      diags.error(display, s.line, s.col, "drift",
                  "step '" + s.name + "' of job '" + s.job + "' is not in the definitions (no step of " + job->file + " runs it)");
    else if (match->devices != s.devices)
      diags.error(display, s.line, s.col, "drift",
                  "step '" + s.name + "' of job '" + s.job + "': the workflow asks task-submit for " + std::to_string(s.devices) +
                      " card(s), " + match->source + " for " + std::to_string(match->devices));
  }
  std::set<std::string> jobs_in_workflow;
  for (const auto& s : wf.steps) jobs_in_workflow.insert(s.job);
  for (const auto& j : plan.jobs)
    if (jobs_in_workflow.count(j.name))
      for (const auto& ps : j.steps)
        if (!in_workflow.count({j.name, norm(ps.run)})) {
          Place at = parse_place(ps.source);
          diags.warning(at.file, at.line, at.col, "drift",
                        "step '" + ps.name + "' of job '" + j.name + "' is not in " + display);
        }
  (void)project;
}

void lint_project_files(const Project& project, const Plan& plan, Diagnostics& diags) {
  lint_duplicate_steps(plan, diags);
  lint_unused_models(project, diags);
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
