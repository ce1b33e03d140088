#include "config/job_file.h"

#include <regex>

namespace pto {

namespace {

const std::vector<std::string> kJobKeys = {"name",     "needs",    "if",       "env",      "timeout-minutes",
                                           "continue-on-error",    "strategy", "defaults", "steps",
                                           "parallel", "toolchain", "outputs", "caches", "reuse"};
const std::vector<std::string> kStepKeys = {"name",  "run",     "env",     "if",      "timeout-minutes",
                                            "continue-on-error", "working-directory", "shell", "devices", "cpus", "memory",
                                            "retry", "models",  "expected-minutes", "id", "device-type",
                                            "queue-timeout-minutes", "run-timeout-minutes", "tests", "split", "caches", "reuse", "perf"};

/// A cache variable the step's or the job's `env:` sets too: one of them would silently lose.
void check_cache_vars(const JobDef& job, Diagnostics& diags) {
  for (const StepDef& sd : job.steps) {
    std::map<std::string, const CacheUse*> vars;
    for (const auto* list : {&job.caches, &sd.caches})
      for (const CacheUse& c : *list) vars[c.var] = &c;
    for (const auto& [var, use] : vars) {
      const bool in_step = sd.env.count(var) > 0, in_job = job.env.count(var) > 0;
      if (!in_step && !in_job) continue;
      const SourceLoc at = in_step ? sd.env_locs.at(var) : job.env_loc;
      diags.error(job.file, at.line, at.col, "cache-var-set",
                  "env." + var + " is cache '" + use->name + "''s variable (caches: on line " + std::to_string(use->loc.line) +
                      "); pto-runner sets it to the tier the run may write: remove it from env");
    }
  }
}

bool valid_job_name(const std::string& s) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_.-]*");
  return std::regex_match(s, re);
}

// Pairs of scalar key/values in file order, for matrix include/exclude entries.
std::optional<std::vector<std::pair<std::string, std::string>>> read_matrix_entry(const YAML::Node& node,
                                                                                 const std::string& file,
                                                                                 Diagnostics& diags) {
  if (!node.IsMap()) {
    SourceLoc l = loc_of(node);
    diags.error(file, l.line, l.col, "wrong-type", "matrix include/exclude entries are mappings, got " +
                                                       describe_node(node));
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar() || !it->second.IsScalar()) {
      SourceLoc l = loc_of(it->second);
      diags.error(file, l.line, l.col, "wrong-type", "matrix values must be strings or numbers, got " +
                                                         describe_node(it->second));
      return std::nullopt;
    }
    out.emplace_back(it->first.Scalar(), it->second.Scalar());
  }
  return out;
}

std::optional<MatrixDef> read_matrix(const YAML::Node& node, const std::string& file, Diagnostics& diags) {
  MatrixDef def;
  def.loc = loc_of(node);
  if (!node.IsMap()) {
    diags.error(file, def.loc.line, def.loc.col, "wrong-type",
                "strategy.matrix expects a mapping of axes, got " + describe_node(node) +
                    (node.IsScalar() && is_expression(node.Scalar()) ? " (expressions such as fromJSON are not "
                                                                       "supported in jobs/)"
                                                                     : ""));
    return std::nullopt;
  }
  bool ok = true;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = it->first.Scalar();
    const YAML::Node& v = it->second;
    SourceLoc l = loc_of(v);
    if (key == "include" || key == "exclude") {
      if (!v.IsSequence()) {
        diags.error(file, l.line, l.col, "wrong-type", "strategy.matrix." + key + " expects a list of mappings");
        ok = false;
        continue;
      }
      for (const auto& e : v) {
        auto entry = read_matrix_entry(e, file, diags);
        if (!entry) ok = false;
        else (key == "include" ? def.include : def.exclude).push_back(*entry);
      }
      continue;
    }
    if (!v.IsSequence()) {
      diags.error(file, l.line, l.col, "wrong-type",
                  "strategy.matrix." + key + " expects a list of values, got " + describe_node(v));
      ok = false;
      continue;
    }
    std::vector<std::string> values;
    for (const auto& item : v) {
      if (!item.IsScalar()) {
        SourceLoc il = loc_of(item);
        diags.error(file, il.line, il.col, "wrong-type",
                    "strategy.matrix." + key + " values must be strings or numbers, got " + describe_node(item));
        ok = false;
        continue;
      }
      values.push_back(item.Scalar());
    }
    if (values.empty()) {
      diags.error(file, l.line, l.col, "bad-value", "strategy.matrix." + key + " is empty");
      ok = false;
    }
    def.axes.emplace_back(key, std::move(values));
  }
  if (!ok) return std::nullopt;
  if (def.axes.empty() && def.include.empty()) {
    diags.error(file, def.loc.line, def.loc.col, "bad-value", "strategy.matrix defines no axis and no include");
    return std::nullopt;
  }
  return def;
}

StepDef read_step(const YAML::Node& node, const std::string& file, Diagnostics& diags) {
  StepDef s;
  s.loc = loc_of(node);
  std::vector<std::string> keys = kStepKeys;
  MapReader m(node, "step", keys, file, diags);
  if (!m.is_map()) return s;
  if (auto v = m.string("id")) {
    s.id = *v;
    s.id_loc = loc_of(m.get("id"));
    static const std::regex id_re("[A-Za-z_][A-Za-z0-9_-]*");
    if (!std::regex_match(*v, id_re))
      m.error_at(m.get("id"), "bad-value", "step: 'id' must start with a letter or _ and hold only letters, digits, _ -; got '" + *v + "'");
  }
  if (auto v = m.string("name")) {
    s.name = *v;
    s.name_loc = loc_of(m.get("name"));
  }
  if (auto v = m.string("run")) {
    s.run = *v;
    s.run_loc = loc_of(m.get("run"));
  }
  if (auto v = m.strings("models", true)) {
    s.models = *v;
    YAML::Node mn = m.get("models");
    if (mn.IsSequence())
      for (const auto& item : mn) s.model_locs.push_back(loc_of(item));
    else
      s.model_locs.assign(s.models.size(), loc_of(mn));
    if (s.models.empty()) m.error_at(mn, "bad-value", "step: 'models' is empty; name at least one models/NAME.yml");
  }
  if (m.has("run") && m.has("models"))
    m.error_at(m.get("models"), "bad-value", "step: give either 'run' or 'models', not both");
  else if (!m.has("run") && !m.has("models"))
    m.error_at(node, "missing-key", "step: needs 'run' (a command) or 'models' (model names)");
  if (auto v = m.scalar_map("env")) {
    s.env = *v;
    YAML::Node en = m.get("env");
    for (auto it = en.begin(); it != en.end(); ++it) s.env_locs[it->first.Scalar()] = loc_of(it->second);
  }
  if (m.has("caches")) s.caches = read_caches(m.get("caches"), file, diags);
  if (m.has("reuse")) s.reuse = read_reuse(m.get("reuse"), file, diags);
  if (m.has("perf")) s.perf = read_perf(m.get("perf"), file, diags);
  if (auto v = m.string("if")) {
    s.if_expr = *v;
    s.if_loc = loc_of(m.get("if"));
  }
  s.timeout_minutes = m.number("timeout-minutes", 0.001, 10080);
  s.queue_timeout_minutes = m.number("queue-timeout-minutes", 0.001, 10080);
  s.run_timeout_minutes = m.number("run-timeout-minutes", 0.001, 10080);
  s.expected_minutes = m.number("expected-minutes", 0, 10080);
  if (auto v = m.string("device-type")) {
    s.device_type = *v;
    s.device_type_loc = loc_of(m.get("device-type"));
  }
  if (auto v = m.boolean("continue-on-error")) s.continue_on_error = *v;
  if (auto v = m.string("working-directory")) {
    s.working_directory = *v;
    s.working_directory_loc = loc_of(m.get("working-directory"));
  }
  if (auto v = m.string("shell")) {
    s.shell = *v;
    if (*v != "bash" && *v != "sh")
      m.error_at(m.get("shell"), "bad-value", "step: 'shell' must be bash or sh, got '" + *v + "'");
  }
  if (m.has("devices")) {
    YAML::Node d = m.get("devices");
    s.devices_loc = loc_of(d);
    if (d.IsScalar() && d.Tag() != "!" && !is_expression(d.Scalar())) {
      if (auto n = m.integer("devices", 0, 1 << 20)) s.devices = std::to_string(*n);
    } else if (d.IsScalar() && is_expression(d.Scalar())) {
      s.devices = d.Scalar();  // checked after matrix expansion
    } else {
      m.error_at(d, "wrong-type", "step: 'devices' expects a non-negative integer, got " + describe_node(d));
    }
  }
  if (auto v = m.integer("cpus", 1, 65536)) s.cpus = static_cast<int>(*v), s.cpus_loc = loc_of(m.get("cpus"));
  if (auto v = m.size("memory", 1 << 20)) s.memory = *v, s.memory_loc = loc_of(m.get("memory"));
  if (m.has("retry")) s.retry = read_retry(m.get("retry"), file, diags);
  if (m.has("tests")) s.tests = read_tests_spec(m.get("tests"), file, diags);
  if (m.has("split")) {
    YAML::Node node = m.get("split");
    s.split_loc = loc_of(node);
    MapReader sp(node, "split", {"shards", "by"}, file, diags);
    if (sp.is_map()) {
      if (auto v = sp.integer("shards", 2, 64)) s.split_shards = static_cast<int>(*v);
      else if (!sp.has("shards")) sp.error_at(node, "missing-key", "split: required key 'shards' is missing");
      if (auto v = sp.string("by"); v && *v != "duration")
        sp.error_at(sp.get("by"), "bad-value", "split: 'by' is duration (learned per-test durations), got '" + *v + "'");
    }
    // Shards are made of the ids pytest collects: only a pytest step has them.
    if (s.tests.format != TestsSpec::Format::Pytest)
      diags.error(file, s.split_loc.line, s.split_loc.col, "bad-value", "step: 'split' needs 'tests: pytest' (its shards are pytest's collected test ids)");
  }
  return s;
}

}  // namespace

RetryPolicy read_retry(const YAML::Node& node, const std::string& file, Diagnostics& diags) {
  RetryPolicy r;
  r.given = true;
  // `max` alone retries any failure, as before causes existed.
  r.on = {FailureCause::Code, FailureCause::Flaky, FailureCause::Card, FailureCause::Infra};
  MapReader m(node, "retry", {"max", "on-exit-codes", "on", "elsewhere", "tests", "max-tests", "control"}, file, diags);
  if (auto v = m.boolean("control")) r.control = *v;
  if (!m.is_map()) return r;
  if (auto v = m.string("tests")) {
    if (*v != "failed" && *v != "all") m.error_at(m.get("tests"), "bad-value", "retry: 'tests' is failed (rerun only the failed tests) or all, got '" + *v + "'");
    r.failed_tests_only = *v == "failed";
  }
  if (auto v = m.integer("max-tests", 1, 100000)) r.max_tests = static_cast<int>(*v);
  if (auto v = m.integer("max", 0, 100)) r.max = static_cast<int>(*v);
  else if (!m.has("max")) m.error_at(node, "missing-key", "retry: required key 'max' is missing");
  if (auto v = m.boolean("elsewhere")) r.elsewhere = *v;
  if (auto v = m.strings("on", true)) {
    r.on.clear();
    for (const auto& name : *v) {
      auto c = failure_cause_named(name);
      if (!c || *c == FailureCause::Code || *c == FailureCause::Timeout)
        m.error_at(m.get("on"), "bad-value", "retry: 'on' lists causes to retry: card, infra, flaky (got '" + name + "'; a failure of the code "
                                             "or a timeout is not retried: it would fail again)");
      else
        r.on.insert(*c);
    }
  }
  if (m.has("on-exit-codes")) {
    YAML::Node codes = m.get("on-exit-codes");
    if (!codes.IsSequence()) {
      m.error_at(codes, "wrong-type", "retry: 'on-exit-codes' expects a list of integers 1-255");
    } else {
      for (const auto& c : codes) {
        long long n = -1;
        if (c.IsScalar()) {
          char* end = nullptr;
          n = std::strtoll(c.Scalar().c_str(), &end, 10);
          if (c.Scalar().empty() || *end) n = -1;
        }
        if (n < 1 || n > 255) {
          m.error_at(c, "bad-value", "retry: exit codes are integers 1-255, got " + describe_node(c));
          continue;
        }
        r.on_exit_codes.push_back(static_cast<int>(n));
      }
    }
  }
  return r;
}

TestsSpec read_tests_spec(const YAML::Node& node, const std::string& file, Diagnostics& diags) {
  TestsSpec t;
  t.loc = loc_of(node);
  if (node.IsScalar()) {
    if (node.Scalar() == "pytest") t.format = TestsSpec::Format::Pytest;
    else diags.error(file, t.loc.line, t.loc.col, "bad-value", "step: 'tests' is pytest, {junit: GLOB} or {format: pytest|junit, path, allow-empty, rerun}, got '" + node.Scalar() + "'");
    return t;
  }
  MapReader m(node, "tests", {"junit", "format", "path", "allow-empty", "rerun"}, file, diags);
  if (!m.is_map()) return t;
  if (m.has("junit") && (m.has("format") || m.has("path")))
    m.error_at(m.get("junit"), "bad-value", "tests: give 'junit: GLOB' or 'format' with 'path', not both");
  if (auto v = m.string("junit")) t.format = TestsSpec::Format::Junit, t.path = *v;
  if (auto v = m.string("format")) {
    if (*v == "pytest") t.format = TestsSpec::Format::Pytest;
    else if (*v == "junit") t.format = TestsSpec::Format::Junit;
    else m.error_at(m.get("format"), "bad-value", "tests: 'format' is pytest or junit, got '" + *v + "'");
  }
  if (auto v = m.string("path")) {
    t.path = *v;
    if (t.format == TestsSpec::Format::Pytest)
      m.error_at(m.get("path"), "bad-value", "tests: a pytest step's reports are written by pto-runner's plugin; 'path' is for format: junit");
  }
  if (t.format == TestsSpec::Format::Junit) {
    const YAML::Node at = m.has("junit") ? m.get("junit") : m.has("path") ? m.get("path") : node;
    if (t.path.empty()) m.error_at(at, "missing-key", "tests: a JUnit step names its reports: 'path: GLOB' (relative to its working directory)");
    else if (t.path.front() == '/' || t.path.find("..") != std::string::npos)
      m.error_at(at, "bad-value", "tests: the report glob '" + t.path + "' must be relative to the step's working directory, without ..");
  }
  if (!m.has("junit") && !m.has("format")) m.error_at(node, "missing-key", "tests: required key 'format' (pytest or junit) is missing");
  if (auto v = m.boolean("allow-empty")) t.allow_empty = *v;
  if (auto v = m.string("rerun")) {
    t.rerun = *v;
    if (v->find("{tests}") == std::string::npos)
      m.error_at(m.get("rerun"), "bad-value", "tests: 'rerun' is a command with {tests} where the ids of the tests to run go");
    if (t.format == TestsSpec::Format::Pytest)
      m.error_at(m.get("rerun"), "bad-value", "tests: a pytest step reruns its failed tests by node id itself; 'rerun' is for format: junit");
  }
  return t;
}

static JobDef load_job_file_unguarded(const std::string& path, const std::string& display, const std::string& stem,
                     Diagnostics& diags) {
  JobDef job;
  job.file = display;
  job.name = stem;
  auto doc = load_yaml_file(path, display, diags);
  if (!doc) return job;
  job.loc = loc_of(*doc);
  job.name_loc = job.loc;
  MapReader m(*doc, "job", kJobKeys, display, diags);
  if (!m.is_map()) return job;
  if (auto v = m.string("name")) {
    job.name = *v;
    job.name_loc = loc_of(m.get("name"));
  }
  if (!valid_job_name(job.name))
    m.error_at(m.has("name") ? m.get("name") : *doc, "bad-value",
               "job name '" + job.name + "' must start with a letter or _ and hold only letters, digits, _ . -");
  if (job.name == "toolchain")
    m.error_at(m.has("name") ? m.get("name") : *doc, "bad-value",
               "job name 'toolchain' is reserved for the PTOAS lead job");
  if (auto v = m.strings("needs", true)) {
    job.needs = *v;
    YAML::Node n = m.get("needs");
    if (n.IsSequence())
      for (const auto& item : n) job.needs_locs.push_back(loc_of(item));
    else
      job.needs_locs.assign(job.needs.size(), loc_of(n));
  }
  if (auto v = m.string("if")) {
    job.if_expr = *v;
    job.if_loc = loc_of(m.get("if"));
  }
  if (auto v = m.scalar_map("env")) {
    job.env = *v;
    job.env_loc = loc_of(m.get("env"));
  }
  if (m.has("caches")) job.caches = read_caches(m.get("caches"), display, diags);
  if (m.has("reuse")) job.reuse = read_reuse(m.get("reuse"), display, diags);
  if (m.has("outputs")) {
    YAML::Node outs = m.get("outputs");
    if (!outs.IsMap()) {
      m.error_at(outs, "wrong-type", "job: 'outputs' expects a mapping of NAME: ${{ steps.ID.outputs.X }}");
    } else {
      for (auto it = outs.begin(); it != outs.end(); ++it) {
        if (!it->second.IsScalar()) {
          m.error_at(it->second, "wrong-type", "job: outputs." + it->first.Scalar() + " must be a string");
          continue;
        }
        job.outputs.emplace_back(it->first.Scalar(), it->second.Scalar());
        job.output_locs.push_back(loc_of(it->second));
      }
    }
  }
  job.timeout_minutes = m.number("timeout-minutes", 0.001, 10080);
  if (auto v = m.boolean("continue-on-error")) job.continue_on_error = *v;
  if (auto v = m.boolean("parallel")) job.parallel = *v;
  if (auto v = m.string("toolchain")) {
    if (*v == "ptoas") job.toolchain = true;
    else m.error_at(m.get("toolchain"), "bad-value", "job: 'toolchain' must be ptoas, got '" + *v + "'");
  }
  if (m.has("strategy")) {
    MapReader s(m.get("strategy"), "strategy", {"matrix", "fail-fast", "max-parallel"}, display, diags);
    if (s.is_map()) {
      if (s.has("matrix")) job.matrix = read_matrix(s.get("matrix"), display, diags);
      if (auto v = s.boolean("fail-fast")) job.fail_fast = *v;
      if (auto v = s.integer("max-parallel", 1, 1024)) job.max_parallel = static_cast<int>(*v);
    }
  }
  if (m.has("defaults")) {
    MapReader d(m.get("defaults"), "defaults", {"run"}, display, diags);
    if (d.is_map() && d.has("run")) {
      MapReader r(d.get("run"), "defaults.run", {"working-directory", "shell"}, display, diags);
      if (auto v = r.string("working-directory")) job.default_working_directory = *v;
      if (auto v = r.string("shell")) {
        job.default_shell = *v;
        if (*v != "bash" && *v != "sh")
          r.error_at(r.get("shell"), "bad-value", "defaults.run: 'shell' must be bash or sh, got '" + *v + "'");
      }
    }
  }
  YAML::Node steps = m.get("steps");
  if (!steps.IsDefined()) {
    m.error_at(*doc, "missing-key", "job: required key 'steps' is missing");
  } else if (!steps.IsSequence()) {
    m.error_at(steps, "wrong-type", "job: 'steps' expects a list, got " + describe_node(steps));
  } else {
    std::map<std::string, int> ids;
    for (const auto& s : steps) {
      job.steps.push_back(read_step(s, display, diags));
      const StepDef& sd = job.steps.back();
      if (sd.id.empty()) continue;
      if (!sd.models.empty())
        diags.error(display, sd.id_loc.line, sd.id_loc.col, "bad-value",
                    "step: a 'models' step becomes one step per example and cannot carry an 'id'");
      auto [it, fresh] = ids.emplace(sd.id, sd.id_loc.line);
      if (!fresh)
        diags.error(display, sd.id_loc.line, sd.id_loc.col, "duplicate-key",
                    "step id '" + sd.id + "' is also used on line " + std::to_string(it->second));
    }
    if (job.steps.empty()) m.error_at(steps, "bad-value", "job: 'steps' is empty");
  }
  check_cache_vars(job, diags);
  return job;
}

std::vector<CacheUse> read_caches(const YAML::Node& node, const std::string& file, Diagnostics& diags) {
  std::vector<CacheUse> out;
  const SourceLoc at = loc_of(node);
  if (!node.IsMap()) {
    diags.error(file, at.line, at.col, "wrong-type", "'caches' expects a mapping of NAME: ENV_VAR, e.g. {ccache: CCACHE_DIR}, got " + describe_node(node));
    return out;
  }
  static const std::regex name_re("[a-z0-9][a-z0-9_.-]{0,63}"), var_re("[A-Z_][A-Z0-9_]{0,127}");
  for (auto it = node.begin(); it != node.end(); ++it) {
    const SourceLoc k = loc_of(it->first), v = loc_of(it->second);
    const std::string name = it->first.Scalar();
    if (!std::regex_match(name, name_re)) {
      diags.error(file, k.line, k.col, "bad-value", "caches: a cache's name is lower-case letters, digits, . _ - (a directory's name), got '" + name + "'");
      continue;
    }
    if (!it->second.IsScalar() || !std::regex_match(it->second.Scalar(), var_re)) {
      diags.error(file, v.line, v.col, "bad-value", "caches." + name + " is the variable that gets its directory, like CCACHE_DIR, got " +
                                                        (it->second.IsScalar() ? "'" + it->second.Scalar() + "'" : describe_node(it->second)));
      continue;
    }
    out.push_back({name, it->second.Scalar(), v});
  }
  return out;
}

std::optional<ReuseSpec> read_reuse(const YAML::Node& node, const std::string& file, Diagnostics& diags) {
  ReuseSpec r;
  r.loc = loc_of(node);
  if (node.IsScalar() && (node.Scalar() == "false" || node.Scalar() == "true")) {
    r.enabled = node.Scalar() == "true";
    return r;
  }
  MapReader m(node, "reuse", {"inputs"}, file, diags);
  if (!m.is_map()) return std::nullopt;
  if (auto v = m.strings("inputs", true)) {
    r.inputs = *v;
    for (const std::string& g : *v)
      if (g.empty() || g == "!" || g[g[0] == '!'] == '/' || g.find("..") != std::string::npos)
        m.error_at(m.get("inputs"), "bad-value",
                   "reuse: 'inputs' are globs relative to the repository, like src/** or !docs/** (left out), got '" + g + "'");
  }
  return r;
}

JobDef load_job_file(const std::string& path, const std::string& display, const std::string& stem,
                     Diagnostics& diags) {
  JobDef out; out.file = display; out.name = stem;
  guard_yaml(display, diags, [&] { out = load_job_file_unguarded(path, display, stem, diags); });
  return out;
}

}  // namespace pto
