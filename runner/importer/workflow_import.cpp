#include "importer/workflow_import.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "config/yaml_map.h"

namespace pto {

namespace {

// --- the task-submit call inside a run: script -------------------------------------------------------------

struct ShellWord {
  std::string text;
  bool op = false;  // && || ; | or a newline: the end of a command
};

// Splits shell text into words as bash would for one simple command: quotes removed, backslash escapes undone
// ("\$TASK_DEVICE" inside double quotes is the literal $TASK_DEVICE the inner shell expands), line
// continuations joined. Expansions are left as written.
std::vector<ShellWord> shell_words(const std::string& s) {
  std::vector<ShellWord> out;
  std::string cur;
  bool have = false;
  auto flush = [&] {
    if (have) out.push_back({cur, false});
    cur.clear();
    have = false;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\' && i + 1 < s.size()) {
      if (s[i + 1] != '\n') cur += s[i + 1], have = true;
      ++i;
    } else if (c == '\'') {
      std::size_t end = s.find('\'', i + 1);
      cur += s.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
      have = true;
      i = end == std::string::npos ? s.size() : end;
    } else if (c == '"') {
      have = true;
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\' && i + 1 < s.size() && std::string("$`\"\\\n").find(s[i + 1]) != std::string::npos) {
          if (s[i + 1] != '\n') cur += s[i + 1];
          ++i;
        } else {
          cur += s[i];
        }
      }
    } else if (c == ' ' || c == '\t') {
      flush();
    } else if (c == '\n' || c == ';' || c == '|' || c == '&') {
      flush();
      std::string op(1, c);
      if ((c == '&' || c == '|') && i + 1 < s.size() && s[i + 1] == c) op += s[++i];
      out.push_back({op, true});
    } else if (c == '#' && !have) {
      while (i < s.size() && s[i] != '\n') ++i;
      --i;
    } else {
      cur += c;
      have = true;
    }
  }
  flush();
  return out;
}

struct TaskSubmitCall {
  std::string command;  // --run, unescaped
  int devices = 1;
  bool device_named = false;  // --device with ids or a variable: the runner's card, now pto-runner's to pick
  std::optional<double> max_time, timeout;
  std::string device_type;
};

std::optional<double> number(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) return std::nullopt;
  return v;
}

// The task-submit call of a run: script, and the text before and after it.
std::optional<TaskSubmitCall> find_task_submit(const std::string& run, std::string& before, std::string& after,
                                               std::vector<std::string>& problems) {
  static const std::regex call_re(R"((^|[\n;&|]\s*)task-submit\s)");
  std::smatch m;
  if (!std::regex_search(run, m, call_re)) return std::nullopt;
  std::size_t start = static_cast<std::size_t>(m.position(0) + m[1].length());
  // The call ends at the first unquoted newline (not a continuation) or command separator.
  std::size_t end = start;
  char quote = 0;
  for (; end < run.size(); ++end) {
    char c = run[end];
    if (c == '\\') {
      ++end;
      continue;
    }
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '\n' || c == ';' || (c == '&' && end + 1 < run.size() && run[end + 1] == '&')) break;
  }
  before = run.substr(0, start);
  after = end < run.size() ? run.substr(end) : "";
  auto words = shell_words(run.substr(start, end - start));
  TaskSubmitCall call;
  int num = 0;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i].text;
    auto value = [&]() -> std::string { return i + 1 < words.size() ? words[++i].text : ""; };
    if (w == "--run") call.command = value();
    else if (w == "--device-num") num = static_cast<int>(number(value()).value_or(1));
    else if (w == "--device") {
      std::string d = value();
      if (d != "auto") {
        call.device_named = true;
        if (d.find_first_not_of("0123456789,") == std::string::npos) call.devices = static_cast<int>(std::count(d.begin(), d.end(), ',')) + 1;
      }
    } else if (w == "--max-time") call.max_time = number(value());
    else if (w == "--timeout") call.timeout = number(value());
    else if (w == "--no-device") call.devices = 0;
    else problems.push_back("task-submit option " + w + " has no equivalent here and was dropped");
  }
  if (num) call.devices = num;
  if (call.command.empty()) return std::nullopt;
  return call;
}

// pypto's layout: the job's checkout is the run's tree; its siblings are the tree's siblings.
std::string map_workspace(std::string s, const std::string& checkout) {
  for (const std::string var : {"$GITHUB_WORKSPACE", "${GITHUB_WORKSPACE}"}) {
    if (!checkout.empty()) {
      const std::string own = var + "/" + checkout;
      // The checkout as a whole path component only: with checkout `pypto`, `$GITHUB_WORKSPACE/pypto-lib` is
      // a sibling, not `./-lib`.
      auto whole = [&](std::size_t end) {
        return end >= s.size() || !(std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_' || s[end] == '-' || s[end] == '.');
      };
      for (std::size_t p = 0; (p = s.find("cd " + own + " && ", p)) != std::string::npos;) s.erase(p, own.size() + 7);
      for (std::size_t p = 0; (p = s.find(own, p)) != std::string::npos;) {
        if (whole(p + own.size())) s.replace(p, own.size(), ".");
        else p += own.size();
      }
    }
    for (std::size_t p; (p = s.find(var + "/")) != std::string::npos;) s.replace(p, var.size() + 1, "../");
  }
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t b = s.find_first_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b);
}

// --- the imported definitions -----------------------------------------------------------------------------

// `export NAME=...` lines made of env values (by name, so a step's own value can replace its job's).
using Exports = std::vector<std::pair<std::string, std::string>>;

struct Step {
  SourceLoc loc;
  std::string name, run, if_expr, working_directory, id;
  std::map<std::string, std::string> env;
  std::optional<double> timeout, queue_timeout, run_timeout;
  bool continue_on_error = false;
  int devices = 0;
  bool task_submit = false;
  // Set when folded into a model: which model and example.
  std::string model, example, args;
  bool repeat = false;  // the same example with the same arguments as an earlier step: not emitted
};

struct Job {
  std::string id, if_expr;
  std::vector<std::string> needs;
  std::map<std::string, std::string> env;
  std::vector<std::pair<std::string, std::string>> outputs;
  YAML::Node strategy;  // carried over as written (matrix, fail-fast, max-parallel)
  bool toolchain = false;      // needed the workflow's `toolchain` job: pto-runner's lead job does that
  std::string device_type;     // runs-on `npu-TYPE`
  std::optional<double> timeout;
  bool continue_on_error = false;
  std::vector<Step> steps;
};

struct Model {
  std::string id, display, dir, command;
  std::vector<const Step*> examples;
};

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

  // Steps running one script command on several examples become a model.
  std::vector<Model> fold_models(Job& job) {
    static const std::regex script_re(R"(^([\s\S]*?)python (\S+)/([A-Za-z0-9_.-]+)\.py((?: \S+)*)$)");
    std::map<std::pair<std::string, std::string>, std::vector<Step*>> groups;  // (prefix, dir) -> steps
    for (auto& s : job.steps) {
      std::smatch m;
      if (s.devices > 0 && std::regex_match(s.run, m, script_re)) groups[{m[1].str(), m[2].str()}].push_back(&s);
    }
    // Only steps that differ in nothing but their example and arguments fold (their env, if: and time bound
    // go on the one `models:` step).
    for (auto it = groups.begin(); it != groups.end();) {
      const Step& a = *it->second.front();
      bool same = std::all_of(it->second.begin(), it->second.end(), [&](const Step* b) {
        return b->env == a.env && b->if_expr == a.if_expr && b->timeout == a.timeout && !b->continue_on_error && b->id.empty();
      });
      it = same ? std::next(it) : groups.erase(it);
    }
    std::vector<Model> models;
    for (auto& [key, steps] : groups) {
      if (steps.size() < 2) continue;
      // The arguments every example shares stay in the command; the rest are each example's args.
      std::vector<std::vector<std::string>> args;
      for (Step* s : steps) {
        std::smatch m;
        std::regex_match(s->run, m, script_re);
        s->example = m[3].str();
        std::istringstream in(m[4].str());
        std::vector<std::string> words;
        for (std::string w; in >> w;) words.push_back(w);
        args.push_back(words);
      }
      std::size_t common = args[0].size();
      for (const auto& a : args) {
        std::size_t k = 0;
        while (k < common && k < a.size() && a[k] == args[0][k]) ++k;
        common = k;
      }
      Model model;
      model.dir = key.second;
      std::string shared;
      for (std::size_t k = 0; k < common; ++k) shared += " " + args[0][k];
      model.command = key.first + "python {dir}/{example}.py" + shared + " {args}";
      for (std::size_t i = 0; i < steps.size(); ++i) {
        std::string a;
        for (std::size_t k = common; k < args[i].size(); ++k) a += (a.empty() ? "" : " ") + args[i][k];
        steps[i]->args = a;
      }
      // "Run pypto-lib Qwen3-14B decode_fwd example": the word before the example names the model.
      std::string name = steps[0]->name;
      std::size_t at = name.find(steps[0]->example);
      std::string head = at == std::string::npos ? "" : trim(name.substr(0, at));
      model.display = head.empty() ? key.second.substr(key.second.rfind('/') + 1) : head.substr(head.rfind(' ') + 1);
      model.id.clear();
      for (char c : model.display) model.id += c == '_' || c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      while (used_model_ids.count(model.id)) model.id += "-" + job.id;
      used_model_ids.insert(model.id);
      for (Step* s : steps) s->model = model.id;
      // A copy-pasted step (same example, same arguments) is the same work: one example, the copy reported.
      for (Step* s : steps) {
        const Step* twin = nullptr;
        for (const Step* e : model.examples) twin = e->example == s->example && e->args == s->args ? e : twin;
        if (!twin) model.examples.push_back(s);
        else if ((s->repeat = true))
          out.not_carried.warning(display, s->loc.line, s->loc.col, "not-imported",
                                  "job '" + job.id + "': step '" + s->name + "' repeats line " + std::to_string(twin->loc.line) +
                                      " (same example, same arguments): imported once");
      }
      models.push_back(model);
    }
    return models;
  }

  std::string step_name_template(const Step& s, const Model& m) {
    std::size_t at = s.name.find(s.example);
    if (at == std::string::npos) return "Run {model} {example} example";
    std::string head = s.name.substr(0, at), tail = s.name.substr(at + s.example.size());
    std::size_t model_at = head.rfind(m.display);
    if (model_at != std::string::npos) head.replace(model_at, m.display.size(), "{model}");
    return head + "{example}" + tail;
  }

  static void emit_minutes(YAML::Emitter& e, const char* key, const std::optional<double>& v) {
    if (!v) return;
    e << YAML::Key << key << YAML::Value;
    if (*v == static_cast<long long>(*v)) e << static_cast<long long>(*v);
    else e << *v;
  }

  static void emit_env(YAML::Emitter& e, const std::map<std::string, std::string>& env) {
    if (env.empty()) return;
    e << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : env) e << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
    e << YAML::EndMap;
  }

  std::string emit_job(const Job& job, const std::vector<Model>& models) {
    YAML::Emitter e;
    e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << job.id;
    if (!job.needs.empty()) e << YAML::Key << "needs" << YAML::Value << YAML::Flow << job.needs;
    if (job.toolchain) e << YAML::Key << "toolchain" << YAML::Value << "ptoas";
    if (!job.if_expr.empty()) e << YAML::Key << "if" << YAML::Value << job.if_expr;
    emit_minutes(e, "timeout-minutes", job.timeout);
    if (job.continue_on_error) e << YAML::Key << "continue-on-error" << YAML::Value << true;
    emit_env(e, job.env);
    if (!job.outputs.empty()) {
      e << YAML::Key << "outputs" << YAML::Value << YAML::BeginMap;
      for (const auto& [k, v] : job.outputs) e << YAML::Key << k << YAML::Value << v;
      e << YAML::EndMap;
    }
    if (job.strategy.IsDefined()) e << YAML::Key << "strategy" << YAML::Value << job.strategy;
    if (!models.empty()) e << YAML::Key << "parallel" << YAML::Value << true;
    e << YAML::Key << "steps" << YAML::Value << YAML::BeginSeq;
    for (std::size_t i = 0; i < job.steps.size(); ++i) {
      const Step& s = job.steps[i];
      if (s.repeat) continue;
      e << YAML::BeginMap;
      if (!s.model.empty()) {
        // Consecutive model steps with one name pattern become one `models:` step.
        const Model* m = nullptr;
        for (const auto& x : models) m = x.id == s.model ? &x : m;
        std::string tmpl = step_name_template(s, *m);
        std::vector<std::string> ids = {s.model};
        while (i + 1 < job.steps.size() && !job.steps[i + 1].model.empty()) {
          const Step& n = job.steps[i + 1];
          if (n.repeat) {
            ++i;
            continue;
          }
          const Model* nm = nullptr;
          for (const auto& x : models) nm = x.id == n.model ? &x : nm;
          if (step_name_template(n, *nm) != tmpl) break;
          if (std::find(ids.begin(), ids.end(), n.model) == ids.end()) ids.push_back(n.model);
          ++i;
        }
        e << YAML::Key << "name" << YAML::Value << tmpl;
        if (!job.device_type.empty()) e << YAML::Key << "device-type" << YAML::Value << job.device_type;
        if (!s.if_expr.empty()) e << YAML::Key << "if" << YAML::Value << s.if_expr;
        emit_minutes(e, "timeout-minutes", s.timeout);
        emit_env(e, s.env);
        e << YAML::Key << "models" << YAML::Value << YAML::Flow << ids;
        e << YAML::EndMap;
        continue;
      }
      if (!s.name.empty()) e << YAML::Key << "name" << YAML::Value << s.name;
      if (!s.id.empty()) e << YAML::Key << "id" << YAML::Value << s.id;
      if (!s.if_expr.empty()) e << YAML::Key << "if" << YAML::Value << s.if_expr;
      if (s.devices) e << YAML::Key << "devices" << YAML::Value << s.devices;
      if (!job.device_type.empty()) e << YAML::Key << "device-type" << YAML::Value << job.device_type;
      emit_minutes(e, "timeout-minutes", s.timeout);
      emit_minutes(e, "queue-timeout-minutes", s.queue_timeout);
      emit_minutes(e, "run-timeout-minutes", s.run_timeout);
      if (s.continue_on_error) e << YAML::Key << "continue-on-error" << YAML::Value << true;
      emit_env(e, s.env);
      e << YAML::Key << "run" << YAML::Value;
      if (s.run.find('\n') != std::string::npos) e << YAML::Literal;
      e << s.run << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
    return std::string("# Imported from ") + display + " by `pto-runner import`.\n" + e.c_str() + "\n";
  }

  std::string emit_model(const Model& m) {
    YAML::Emitter e;
    e << YAML::BeginMap << YAML::Key << "model" << YAML::Value << m.display << YAML::Key << "dir" << YAML::Value << m.dir;
    e << YAML::Key << "command" << YAML::Value;
    if (m.command.find('\n') != std::string::npos) e << YAML::Literal;
    e << m.command;
    // Time bounds shared by every example are the model's.
    const Step& first = *m.examples.front();
    bool same_run = true, same_queue = true;
    for (const Step* s : m.examples) same_run &= s->run_timeout == first.run_timeout, same_queue &= s->queue_timeout == first.queue_timeout;
    if (same_queue) emit_minutes(e, "queue-timeout-minutes", first.queue_timeout);
    if (same_run) emit_minutes(e, "run-timeout-minutes", first.run_timeout);
    e << YAML::Key << "examples" << YAML::Value << YAML::BeginSeq;
    for (const Step* s : m.examples) {
      e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << s->example;
      if (s->devices != 1) e << YAML::Key << "devices" << YAML::Value << s->devices;
      if (!s->args.empty()) e << YAML::Key << "args" << YAML::Value << s->args;
      if (!same_queue) emit_minutes(e, "queue-timeout-minutes", s->queue_timeout);
      if (!same_run) emit_minutes(e, "run-timeout-minutes", s->run_timeout);
      e << YAML::EndMap;
    }
    e << YAML::EndSeq << YAML::EndMap;
    return std::string("# Imported from ") + display + " by `pto-runner import`.\n" + e.c_str() + "\n";
  }

  void run(const YAML::Node& doc) {
    YAML::Node jobs = child(doc, "jobs");
    if (!jobs.IsMap()) {
      SourceLoc l = loc_of(doc);
      diags.error(display, l.line, l.col, "wrong-type", "the workflow has no `jobs:` mapping");
      return;
    }
    // NPU work is what moves to pto-runner: a job whose runs-on has an `npu...` label, or that calls
    // task-submit. CPU jobs (and the docs gate, lint, unit tests) stay in GitHub Actions; a workflow with no
    // NPU job at all is imported whole.
    static const std::regex task_submit_call(R"((^|[\n;&|]\s*)task-submit\s)");
    std::map<std::string, ImportedJob> kinds;
    bool any_npu = false;
    for (auto it = jobs.begin(); it != jobs.end(); ++it) {
      const YAML::Node& j = it->second;
      if (!j.IsMap()) continue;
      ImportedJob ij{it->first.Scalar(), false, "", loc_of(it->first).line, loc_of(it->first).col};
      std::vector<std::string> labels;
      if (child(j, "runs-on").IsSequence()) for (const auto& l : child(j, "runs-on")) labels.push_back(scalar(l));
      else labels.push_back(scalar(child(j, "runs-on")));
      for (const auto& l : labels)
        if (l.rfind("npu", 0) == 0) {
          ij.npu = true;
          if (l.size() > 4 && l[3] == '-') ij.card_type = l.substr(4);
        }
      if (child(j, "steps").IsSequence())
        for (const auto& st : child(j, "steps")) ij.npu |= std::regex_search(scalar(child(st, "run")), task_submit_call);
      any_npu |= ij.npu;
      kinds[ij.id] = ij;
      out.jobs.push_back(ij);
    }
    for (auto it = jobs.begin(); it != jobs.end(); ++it) {
      const std::string id = it->first.Scalar();
      const YAML::Node& j = it->second;
      if (!j.IsMap()) continue;
      const bool imported = !any_npu || kinds[id].npu;
      if (!imported)
        skip(it->first, "job '" + id + "' stays in GitHub Actions: no NPU work (no runs-on npu label, no task-submit)");
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
        out.steps.push_back({id, s.name, s.run, s.devices, s.task_submit, s.timeout, s.queue_timeout, s.run_timeout, s.loc.line, s.loc.col});
      if (!imported) continue;
      std::vector<Model> models = fold_models(job);
      out.files.push_back({"jobs/" + id + ".yml", emit_job(job, models)});
      for (auto& m : models) out.files.push_back({"models/" + m.id + ".yml", emit_model(m)});
    }
  }

  Job job_of(const std::string& id, const YAML::Node& j, std::map<std::string, ImportedJob>& kinds) {
    for (const char* key : {"services", "container", "uses", "environment", "concurrency"})
      if (j[key].IsDefined()) skip(j[key], "job '" + id + "': " + key + ": has no equivalent in pto-runner");
    if (child(j, "runs-on").IsDefined())
      skip(child(j, "runs-on"), "job '" + id + "': runs-on: the daemon's host runs it (card types say which cards)");
    Job job;
    job.id = id;
    job.device_type = kinds[id].card_type;
    std::vector<YAML::Node> needs;
    if (child(j, "needs").IsSequence()) for (const auto& n : child(j, "needs")) needs.push_back(n);
    else if (child(j, "needs").IsScalar()) needs.push_back(child(j, "needs"));
    bool any_npu = false;
    for (const auto& [_, k] : kinds) any_npu |= k.npu;
    dropped_needs.clear();
    for (const auto& n : needs) {
      const std::string need = n.Scalar();
      if (need == "toolchain") {
        job.toolchain = true;  // the pin's lead job: set up once per run, before every job that declares it
        dropped_needs.insert(need);
      } else if (any_npu && kinds.count(need) && !kinds[need].npu) {
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
  Importer imp{display, diags, out};
  guard_yaml(display, diags, [&] { imp.run(*doc); });
  return out;
}

}  // namespace pto
