#include "importer/workflow_import.h"

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "config/yaml_map.h"
#include "importer/definitions_emitter.h"
#include "importer/imported_tree.h"
#include "importer/model_folding.h"
#include "importer/task_submit_call.h"

namespace pto {

namespace {

using namespace imported;

std::string scalar(const YAML::Node& n) { return n.IsDefined() && n.IsScalar() ? n.Scalar() : ""; }

// A GitHub-only context (github.*, secrets.*, runner.*, inputs.*, vars.*) in a value: it has no equivalent here.
bool github_only(const std::string& v) {
  static const std::regex re(R"(\$\{\{[^}]*\b(github|secrets|runner|inputs|vars|job|strategy)\.)");
  return std::regex_search(v, re);
}

struct Importer {
  std::string display;
  Diagnostics& diags;
  ImportResult& out;
  std::string repo_root;  // where `uses: ./X` resolves: the workflow's repository (above .github/workflows)
  std::set<std::string> used_model_ids;
  // Of the job being imported: needs that are not carried over (the toolchain job, jobs left in Actions).
  std::set<std::string> dropped_needs;

  // The dropped need a value reads (`${{ needs.X.outputs.Y }}`), or "".
  std::string reads_dropped_need(const std::string& v) const {
    static const std::regex need_ref(R"(needs\.([A-Za-z_][A-Za-z0-9_-]*)\.)");
    for (std::sregex_iterator m(v.begin(), v.end(), need_ref), e; m != e; ++m)
      if (dropped_needs.count((*m)[1].str())) return (*m)[1].str();
    return "";
  }

  void skip(const YAML::Node& n, const std::string& what) {
    SourceLoc l = loc_of(n);
    out.not_carried.warning(display, l.line, l.col, "not-imported", what);
  }

  // `exports`: values that are a path under ${{ github.workspace }} (pypto's PYTHONPATH) cannot be env values
  // here (they are literal); they become `export NAME="$(realpath -m -- DIR)"` lines at the start of the run, DIR
  // mapped as the run's paths are (the job's checkout is the run's tree, its siblings the tree's siblings).
  std::map<std::string, std::string> env_of(const YAML::Node& n, const std::string& where, const std::string& checkout,
                                            Exports& exports) {
    static const std::regex workspace_path(R"(^\$\{\{\s*github\.workspace\s*\}\}(/[A-Za-z0-9._/-]*)?$)");
    static const std::regex shell_name("[A-Za-z_][A-Za-z0-9_]*");
    std::map<std::string, std::string> env;
    if (!n.IsMap()) return env;
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string v = scalar(it->second);
      const std::string name = it->first.Scalar();
      std::smatch m;
      // What the lead job gives every toolchain job (toolchain/toolchain_setup): a value of the workflow's own
      // (pypto's `PTOAS_ROOT: ${{ github.workspace }}/ptoas-bin`) would point the steps away from it.
      static const std::set<std::string> lead_sets = {"PTOAS_ROOT", "PTOAS_BIN", "PTOAS_VERSION", "PTOAS_SHA256"};
      if (lead_sets.count(name)) {
        skip(it->first, where + " env " + name + ": the toolchain lead job sets it (to the PTOAS it installed); dropped");
        continue;
      }
      if (std::string need = reads_dropped_need(v); !need.empty()) {
        skip(it->second, where + " env " + name + ": " + v + " reads job '" + need + "', which is not carried over" +
                             (need == "toolchain" ? " (the lead job sets the pin's environment)" : "") + "; dropped");
      } else if (std::regex_match(v, m, workspace_path)) {
        // The name goes into a shell line: only a shell variable name may (the workflow is not trusted text).
        if (!std::regex_match(name, shell_name)) {
          skip(it->first, where + " env " + name + ": not a shell variable name, so it cannot be exported; dropped");
          continue;
        }
        // A literal path in GitHub, which need not exist yet (a later line may clone it): made absolute
        // without cd. DIR holds only [A-Za-z0-9._/-] (the pattern above) and starts with `.`.
        std::string dir = map_workspace("$GITHUB_WORKSPACE" + (m[1].length() ? m[1].str() : "/"), checkout);
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        exports.emplace_back(name, "export " + name + "=\"$(realpath -m -- " + dir + ")\"\n");
      } else if (github_only(v)) {
        skip(it->second, where + " env " + name + ": " + v + " reads a GitHub-only context");
      } else {
        env[name] = v;
      }
    }
    return env;
  }

  // Lines of a run: script that only print or check the runner's own $DEVICE_ID go (pto-runner picks and
  // holds the cards), each said at the step; a harness told to borrow "$DEVICE_ID" borrows from the queue
  // instead (auto). Only whole one-line checks go: an `if`/`{` block that spans lines is kept as written.
  static bool runner_device_line(const std::string& line) {
    static const std::regex echo_line(R"re(^\s*echo\s[^>|;&]*(^|[^A-Za-z0-9_])\$\{?DEVICE_ID\}?([^A-Za-z0-9_>|;&][^>|;&]*)?$)re");
    static const std::regex test_line(
        R"re(^\s*(test|\[) -n "?\$\{?DEVICE_ID\}?"?( \])? \|\| (\{[^{}]*; *\}|exit [0-9]+|echo [^;{}|&]*)\s*$)re");
    return std::regex_match(line, echo_line) || std::regex_match(line, test_line);
  }

  std::string drop_runner_device(const std::string& run, const YAML::Node& where, const std::string& what) {
    static const std::regex pinned(R"re(--task-submit-device=("\$\{?DEVICE_ID\}?"|\$\{?DEVICE_ID\}?))re");
    std::string out;
    bool pinned_seen = false;
    std::istringstream lines(run);
    for (std::string line; std::getline(lines, line);) {
      if (runner_device_line(line)) {
        skip(where, what + ": dropped `" + trim(line) + "` (it reads the runner's own $DEVICE_ID; the queue picks the cards)");
        continue;
      }
      if (std::regex_search(line, pinned)) {
        line = std::regex_replace(line, pinned, "--task-submit-device=auto");
        pinned_seen = true;
      }
      out += line + "\n";
    }
    if (pinned_seen)
      skip(where, what + ": --task-submit-device=\"$DEVICE_ID\" became auto (the queue lends the harness its cards)");
    return out;
  }

  Step step_of(const YAML::Node& s, const std::string& job, const std::string& checkout, const Exports& job_exports,
               const std::set<std::string>& dropped_ids) {
    Step st;
    st.loc = loc_of(s);
    st.name = scalar(child(s, "name"));
    st.id = scalar(child(s, "id"));
    st.if_expr = scalar(child(s, "if"));
    // An `if:` on the outputs of a step that was not carried over (an action's cache-hit): the step always runs.
    static const std::regex step_ref(R"(steps\.([A-Za-z_][A-Za-z0-9_-]*)\.)");
    for (std::sregex_iterator m(st.if_expr.begin(), st.if_expr.end(), step_ref), e; m != e; ++m)
      if (dropped_ids.count((*m)[1].str())) {
        skip(child(s, "if"), "job '" + job + "', step '" + st.name + "': if: " + st.if_expr + " reads step '" + (*m)[1].str() +
                                 "', which was not carried over: the step always runs");
        st.if_expr.clear();
        break;
      }
    Exports own;
    st.env = env_of(child(s, "env"), "step '" + st.name + "'", checkout, own);
    // The job's exports first, but not one the step sets itself (the step's env wins, as in GitHub).
    std::string exports;
    for (const auto& [name, line] : job_exports) {
      bool overridden = st.env.count(name) > 0;
      for (const auto& o : own) overridden |= o.first == name;
      if (!overridden) exports += line;
    }
    for (const auto& o : own) exports += o.second;
    if (auto t = number(scalar(child(s, "timeout-minutes")))) st.timeout = t;
    st.continue_on_error = scalar(child(s, "continue-on-error")) == "true";
    std::string run = scalar(child(s, "run"));
    std::string before, after;
    std::vector<std::string> problems;
    if (auto call = find_task_submit(run, before, after, problems)) {
      st.devices = call->devices;
      st.task_submit = true;
      if (call->max_time && *call->max_time > 0) st.run_timeout = *call->max_time / 60;
      if (call->timeout && *call->timeout > 0) st.queue_timeout = *call->timeout / 60;
      // The runner's own $DEVICE_ID lines go: pto-runner picks and holds the cards now.
      std::string kept;
      std::istringstream lines(before);
      for (std::string line; std::getline(lines, line);)
        if (!trim(line).empty()) kept += line + "\n";
      run = kept + map_workspace(call->command, checkout) + (trim(after).empty() ? "" : "\n" + trim(after));
      for (const auto& p : problems) skip(child(s, "run"), "job '" + job + "', step '" + st.name + "': " + p);
    } else {
      run = map_workspace(run, checkout);
    }
    run = drop_runner_device(run, child(s, "run"), "job '" + job + "', step '" + st.name + "'");
    if (github_only(run)) skip(child(s, "run"), "job '" + job + "', step '" + st.name + "': its run: reads a GitHub-only context");
    st.run = trim(exports + trim(run));
    return st;
  }

  void run(const YAML::Node& doc) {
    YAML::Node jobs = child(doc, "jobs");
    if (!jobs.IsMap()) {
      SourceLoc l = loc_of(doc);
      diags.error(display, l.line, l.col, "wrong-type", "the workflow has no `jobs:` mapping");
      return;
    }
    // NPU work is what moves to pto-runner: a job whose runs-on has an `npu...` label, or that calls
    // task-submit; and the system tests on the cards' simulators (pypto's `system-tests-a5sim`: pytest
    // tests/st `--platform=a5sim`), which the daemon runs on its host's CPUs beside the cards' jobs. Other CPU
    // jobs (the docs gate, lint, unit tests, examples) stay in GitHub Actions; a workflow with no NPU job at all
    // is imported whole.
    static const std::regex task_submit_call(R"((^|[\n;&|]\s*)task-submit\s)");
    // The system tests (pytest over tests/st) on a card simulator; examples and docs run on simulators too, on
    // CPU hosts of their own, and stay there.
    static const std::regex simulator_run(R"(pytest\b[^\n]*\btests/st\b[^\n]*(--platform[= ]|\s-p\s+)["']?[A-Za-z0-9_,]*sim\b)");
    std::map<std::string, ImportedJob> kinds;
    bool any_npu = false;
    for (auto it = jobs.begin(); it != jobs.end(); ++it) {
      const YAML::Node& j = it->second;
      if (!j.IsMap()) continue;
      ImportedJob ij;
      ij.id = it->first.Scalar();
      ij.line = loc_of(it->first).line;
      ij.col = loc_of(it->first).col;
      std::vector<std::string> labels;
      if (child(j, "runs-on").IsSequence()) for (const auto& l : child(j, "runs-on")) labels.push_back(scalar(l));
      else labels.push_back(scalar(child(j, "runs-on")));
      for (const auto& l : labels) {
        ij.runs_on += (ij.runs_on.empty() ? "" : ", ") + l;
        if (l.rfind("npu", 0) == 0) {
          ij.npu = true;
          if (l.size() > 4 && l[3] == '-') ij.card_type = l.substr(4);
          ij.bare_npu |= l == "npu";
        }
      }
      ij.runs_on = "[" + ij.runs_on + "]";
      ij.labels = labels;
      if (child(j, "steps").IsSequence())
        for (const auto& st : child(j, "steps")) {
          ij.npu |= std::regex_search(scalar(child(st, "run")), task_submit_call);
          ij.simulator |= std::regex_search(scalar(child(st, "run")), simulator_run);
        }
      if (ij.npu) ij.simulator = false;
      any_npu |= ij.npu;
      kinds[ij.id] = ij;
      out.jobs.push_back(ij);
    }
    for (auto it = jobs.begin(); it != jobs.end(); ++it) {
      const std::string id = it->first.Scalar();
      const YAML::Node& j = it->second;
      if (!j.IsMap()) continue;
      const bool imported = !any_npu || kinds[id].moves();
      if (!imported)
        skip(it->first, "job '" + id + "' stays in GitHub Actions: no NPU work (no runs-on npu label, no task-submit, no card simulator)");
      else if (any_npu && kinds[id].simulator)
        skip(it->first, "job '" + id + "' runs the cards' simulators: the daemon runs it on its host's CPUs, with no card; its runs-on " +
                            kinds[id].runs_on + " becomes the NPU host's in the emitted workflow");
      // What a job left in Actions could not carry over is no one's concern: its notes are not kept.
      Diagnostics kept;
      if (!imported) std::swap(out.not_carried, kept);
      Job job = job_of(id, j, kinds);
      if (!imported) std::swap(out.not_carried, kept);
      if (job.steps.empty()) {
        if (imported) skip(j, "job '" + id + "': no run: step left to import");
        continue;
      }
      for (const auto& s : job.steps)
        out.steps.push_back({id, s.name, s.run, s.devices, s.task_submit, s.timeout, s.queue_timeout, s.run_timeout, s.loc.line, s.loc.col, s.env});
      for (auto& j : out.jobs)
        if (j.id == id) j.env = job.env;
      if (!imported) continue;
      std::vector<Model> models = fold_models(job, used_model_ids, display, out.not_carried);
      // A job of model examples runs its steps in parallel: the setup steps before them (pypto's clone of
      // pypto-lib) would race them, so they become a job of their own that it needs.
      if (!models.empty() && !job.steps.empty() && job.steps.front().model.empty() && !job.steps.front().devices) {
        Job setup = job;
        setup.id = id + "-setup";
        setup.steps.clear();
        setup.outputs.clear();
        setup.strategy.reset(YAML::Node(YAML::NodeType::Undefined));  // rebinds (operator= would write through to the job's)
        std::size_t n = 0;
        // Marked as not written here rather than erased: the models point at this job's steps.
        for (; n < job.steps.size() && job.steps[n].model.empty() && !job.steps[n].devices; ++n) {
          setup.steps.push_back(job.steps[n]);
          job.steps[n].repeat = true;
        }
        job.needs.push_back(setup.id);
        out.not_carried.warning(display, setup.steps.front().loc.line, setup.steps.front().loc.col, "not-imported",
                                "job '" + id + "': its " + std::to_string(n) + " setup step(s) before the examples are job '" + setup.id +
                                    "', which it needs: its examples run in parallel and would race them");
        out.files.push_back({"jobs/" + setup.id + ".yml", emit_job(setup, {}, display)});
      }
      out.files.push_back({"jobs/" + id + ".yml", emit_job(job, models, display)});
      for (auto& m : models) out.files.push_back({"models/" + m.id + ".yml", emit_model(m, display)});
    }
  }

  Job job_of(const std::string& id, const YAML::Node& j, std::map<std::string, ImportedJob>& kinds) {
    for (const char* key : {"services", "container", "uses", "environment", "concurrency"})
      if (j[key].IsDefined()) skip(j[key], "job '" + id + "': " + key + ": has no equivalent in pto-runner");
    if (child(j, "runs-on").IsDefined())
      skip(child(j, "runs-on"), "job '" + id + "': runs-on: the daemon's host runs it (card types say which cards)");
    Job job;
    job.id = id;
    // The card type its runner labels name: `npu-X` is X; the plain `npu` is pypto's a2a3 host.
    job.device_type = !kinds[id].card_type.empty() ? kinds[id].card_type : kinds[id].bare_npu ? "a2a3" : "";
    std::vector<YAML::Node> needs;
    if (child(j, "needs").IsSequence()) for (const auto& n : child(j, "needs")) needs.push_back(n);
    else if (child(j, "needs").IsScalar()) needs.push_back(child(j, "needs"));
    bool any_npu = false;
    for (const auto& [_, k] : kinds) any_npu |= k.npu;  // (simulator jobs move only beside NPU ones)
    dropped_needs.clear();
    for (const auto& n : needs) {
      const std::string need = n.Scalar();
      if (need == "toolchain") {
        job.toolchain = true;  // the pin's lead job: set up once per run, before every job that declares it
        dropped_needs.insert(need);
      } else if (any_npu && kinds.count(need) && !kinds[need].moves()) {
        dropped_needs.insert(need);
        skip(n, "job '" + id + "': needs: " + need + " stays in GitHub Actions (the workflow that submits the run can "
                                                   "wait for it); dropped");
      } else {
        job.needs.push_back(need);
      }
    }
    job.if_expr = scalar(child(j, "if"));
    if (github_only(job.if_expr)) {
      skip(child(j, "if"), "job '" + id + "': if: " + job.if_expr + " reads a GitHub-only context");
      job.if_expr.clear();
    } else if (std::string need = reads_dropped_need(job.if_expr); !need.empty()) {
      // pypto's docs-only gate: the workflow that submits the run decides whether to submit it at all.
      skip(child(j, "if"), "job '" + id + "': if: " + job.if_expr + " reads job '" + need +
                               "', which stays in GitHub Actions: decide there whether to submit the run; dropped");
      job.if_expr.clear();
    }
    const std::string checkout = scalar(child(child(child(j, "defaults"), "run"), "working-directory"));
    Exports job_exports;
    job.env = env_of(child(j, "env"), "job '" + id + "'", checkout, job_exports);
    if (auto t = number(scalar(child(j, "timeout-minutes")))) job.timeout = t;
    job.continue_on_error = scalar(child(j, "continue-on-error")) == "true";
    if (child(j, "outputs").IsMap())
      for (auto o = child(j, "outputs").begin(); o != child(j, "outputs").end(); ++o) job.outputs.emplace_back(o->first.Scalar(), scalar(o->second));
    job.strategy = child(j, "strategy");
    std::set<std::string> dropped_ids;  // ids of steps not carried over (actions): an `if:` on them cannot hold
    if (child(j, "steps").IsSequence())
      for (const auto& s : child(j, "steps")) {
        if (child(s, "uses").IsDefined()) {
          if (!scalar(child(s, "id")).empty()) dropped_ids.insert(scalar(child(s, "id")));
          // A local composite action: what its steps do is read for the drift check (lint --against).
          if (const std::string uses = scalar(child(s, "uses")); uses.rfind("./", 0) == 0) {
            std::string problem;
            if (auto use = read_composite_action(repo_root, uses, child(s, "with"), problem)) {
              const SourceLoc l = loc_of(child(s, "uses"));
              out.composites.push_back({id, uses, l.line, l.col, std::move(use->steps), std::move(use->unsets)});
            } else {
              skip(child(s, "uses"), "job '" + id + "': uses: " + uses + ": " + problem);
            }
          }
          skip(child(s, "uses"), "job '" + id + "': uses: " + scalar(child(s, "uses")) +
                                     (scalar(child(s, "uses")).rfind("actions/checkout", 0) == 0
                                          ? " (not needed: a run is of one commit, in its own worktree)"
                                          : " (actions do not run here; do its work in a run: step)"));
          continue;
        }
        if (!child(s, "run").IsDefined()) continue;
        job.steps.push_back(step_of(s, id, checkout, job_exports, dropped_ids));
      }
    return job;
  }
};

}  // namespace

ImportResult import_workflow(const std::string& path, const std::string& display, Diagnostics& diags) {
  ImportResult out;
  auto doc = load_yaml_file(path, display, diags);
  if (!doc) return out;
  Importer imp{display, diags, out, ""};
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  imp.repo_root = (dir.filename() == "workflows" && dir.parent_path().filename() == ".github") ? dir.parent_path().parent_path().string()
                                                                                                : dir.string();
  guard_yaml(display, diags, [&] { imp.run(*doc); });
  return out;
}

std::map<std::string, std::vector<std::string>> submitted_jobs(const std::vector<ImportedJob>& jobs) {
  // The NPU host the runs are submitted from: the first job on the plain `npu` label (pypto's a2a3 hosts),
  // else the first NPU job's.
  std::vector<std::string> host;
  for (const auto& j : jobs)
    if (j.npu && (host.empty() || j.bare_npu)) {
      host = j.labels;
      if (j.bare_npu) break;
    }
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& j : jobs)
    if (j.npu) out[j.id] = {};
    else if (j.simulator && !host.empty()) out[j.id] = host;
  return out;
}

}  // namespace pto
