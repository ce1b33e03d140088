#include "plan/plan.h"

#include <sys/utsname.h>

#include <algorithm>
#include <functional>
#include <set>

#include "config/device_spec.h"
#include "config/job_graph.h"
#include "config/yaml_map.h"
#include "plan/condition.h"
#include "plan/expression.h"
#include "plan/step_key.h"
#include "util/byte_size.h"

namespace pto {

const PlanJob* Plan::find(const std::string& id) const {
  for (const auto& j : jobs)
    if (j.id == id) return &j;
  return nullptr;
}

int Plan::deduplicated_count() const {
  int n = 0;
  for (const auto& j : jobs)
    for (const auto& s : j.steps) n += s.deduplicated_from.has_value();
  return n;
}

std::string host_arch() {
  struct utsname u {};
  if (uname(&u) != 0) return "x86_64";
  std::string m = u.machine;
  return m == "arm64" ? "aarch64" : m;
}

std::string step_label(std::string_view job_id, std::string_view step_name) {
  std::string label;
  label.reserve(job_id.size() + step_name.size() + 3);
  return label.append(job_id).append(" / ").append(step_name);
}

namespace {

std::string where(const std::string& file, SourceLoc l) {
  return file + ":" + std::to_string(l.line) + ":" + std::to_string(l.col);
}

class Builder {
 public:
  Builder(const Project& p, const PlanOptions& o, Diagnostics& d) : project_(p), opts_(o), diags_(d) {}

  Plan build() {
    Plan plan;
    plan.ptoas_version = project_.versions.ptoas_version;
    plan.arch = opts_.arch.empty() ? host_arch() : opts_.arch;
    plan.pool_size = static_cast<int>(project_.runner.device_ids.size());
    plan.largest_gang = largest_gang(project_.runner.device_ids, project_.runner.device_groups);

    std::set<std::string> selected = select_jobs();
    std::map<std::string, std::vector<std::string>> graph;
    for (const auto& j : project_.jobs)
      if (selected.count(j.name)) {
        auto& deps = graph[j.name];
        for (const auto& n : j.needs)
          if (selected.count(n)) deps.push_back(n);
      }
    JobGraphResult order = order_jobs(graph);
    if (!order.cycle.empty()) return plan;  // reported by load_project

    bool needs_toolchain = false;
    for (const auto& name : order.order)
      if (const JobDef* j = project_.find_job(name); j && j->toolchain) needs_toolchain = true;
    if (needs_toolchain) plan.jobs.push_back(lead_job(plan));

    for (const auto& name : order.order) {
      const JobDef* def = project_.find_job(name);
      if (!def) continue;
      std::vector<MatrixLeg> legs{{}};
      if (def->matrix) {
        MatrixExpansion m = expand_matrix(*def->matrix);
        if (!m.error.empty()) {
          diags_.error(def->file, def->matrix->loc.line, def->matrix->loc.col, "matrix-too-large",
                       "strategy.matrix: " + m.error);
          continue;
        }
        legs = m.legs;
      }
      for (const auto& leg : legs) plan.jobs.push_back(job_leg(*def, leg, plan));
    }
    return plan;
  }

 private:
  std::set<std::string> select_jobs() {
    std::set<std::string> out;
    if (opts_.jobs.empty()) {
      for (const auto& j : project_.jobs) out.insert(j.name);
      return out;
    }
    std::vector<std::string> names;
    for (const auto& j : project_.jobs) names.push_back(j.name);
    std::function<void(const std::string&)> add = [&](const std::string& n) {
      const JobDef* j = project_.find_job(n);
      if (!j || !out.insert(n).second) return;
      for (const auto& need : j->needs) add(need);
    };
    for (const auto& want : opts_.jobs) {
      if (!project_.find_job(want)) {
        std::string near = nearest_word(want, names);
        diags_.error("(command line)", 0, 0, "unknown-job",
                     "--job: no job named '" + want + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"));
        continue;
      }
      add(want);
    }
    return out;
  }

  static void set_perf(PlanStep& s, const std::optional<PerfSpec>& perf) {
    if (!perf) return;
    s.perf = perf;
    if (s.perf->name.empty()) s.perf->name = s.name;
    s.reuse = false;  // a benchmark measures each time
  }

  PlanJob lead_job(const Plan& plan) {
    PlanJob lead;
    lead.id = lead.name = "toolchain";
    lead.file = "toolchain/versions.env";
    lead.lead = true;
    PlanStep s;
    s.name = "Set up PTOAS " + plan.ptoas_version + " (" + plan.arch + ")";
    s.kind = StepKind::ToolchainSetup;
    s.run = "pto-runner toolchain setup";
    s.origin = s.source = "toolchain/versions.env";
    s.expected_minutes = 0.5;
    s.key = step_key({s.run, {}, "", "bash", 0, "", "", nullptr, ""});
    lead.steps.push_back(std::move(s));
    return lead;
  }

  // Substitutes ${{ matrix.x }}, reporting the first problem at `loc`.
  std::string subst(const std::string& text, const MatrixLeg& leg, const std::string& file, SourceLoc loc) {
    std::string error;
    std::string out = substitute_matrix(text, leg, error);
    if (!error.empty()) report_once(file, loc, "bad-value", error);
    return out;
  }

  void report_once(const std::string& file, SourceLoc loc, const std::string& rule, const std::string& msg) {
    // A matrix job repeats its steps per leg; report each problem once.
    if (reported_.insert(where(file, loc) + rule + msg).second) diags_.error(file, loc.line, loc.col, rule, msg);
  }

  void check_condition(const std::string& expr, const std::string& file, SourceLoc loc, const char* what,
                       const ExpressionScope& scope) {
    if (expr.empty()) return;
    std::string err;
    int col = 0;
    auto c = Condition::parse(expr, err, &col);
    if (!c) {
      report_once(file, loc, "bad-value", std::string(what) + ": " + err);
      return;
    }
    for (const auto& path : c->contexts())
      if (std::string e = check_context(path, scope); !e.empty()) {
        report_once(file, loc, "bad-value", std::string(what) + ": " + e);
        return;
      }
  }

  // Every ${{ }} left after matrix substitution must read something that will exist when it is evaluated.
  void check_text(const std::string& text, const ExpressionScope& scope, const std::string& file, SourceLoc loc,
                  const std::string& what) {
    if (!has_expression(text)) return;
    if (std::string e = check_expressions(text, scope); !e.empty()) report_once(file, loc, "bad-value", what + ": " + e);
  }

  void check_pool(int devices, const std::string& type, const std::string& step_name, const std::string& file,
                  SourceLoc loc, const Plan& plan) {
    // A step with no cards of its own may still name a type: its task-submit leases ask for it.
    if (devices == 0 && type.empty()) return;
    if (project_.default_host && !project_.host_profiles.empty()) {
      // No host of its own: the repository's hosts say. One of them must serve the step.
      std::string why;
      bool type_nowhere = !type.empty();
      for (const auto& h : project_.host_profiles) {
        std::string no = pool_refusal(h.host, h.host.largest_gang(), static_cast<int>(h.host.device_ids.size()), devices, type, step_name);
        if (no.empty()) return;
        type_nowhere &= no.find("no card of this host has it") != std::string::npos;
        why += (why.empty() ? "" : "; ") + h.file + ": " + no.substr(no.find("; ") + 2);
      }
      report_once(file, loc, type_nowhere ? "unknown-device-type" : "devices-exceed-pool",
                  "step '" + step_name + "' needs " + std::to_string(devices) + " card(s)" + (type.empty() ? "" : " of type " + type) +
                      "; no host of ci/hosts/ has them (" + why + ")");
      return;
    }
    if (!type.empty() && project_.default_host) return;  // which types a host has is the host's to say
    std::string no = pool_refusal(project_.runner, plan.largest_gang, plan.pool_size, devices, type, step_name);
    if (!no.empty()) report_once(file, loc, no.find("no card of this host") != std::string::npos ? "unknown-device-type" : "devices-exceed-pool", no);
  }

  /// A step asking more CPUs or memory than the hosts it is written for have (runner.yml `host:`; with
  /// ci/hosts/ profiles and no host of its own, the largest of them): an error where the request is written.
  /// Where neither says, the machine that reads the definitions is not where they run: no check (at run time
  /// such a step takes the whole machine, host/dispatcher).
  void check_host(const PlanStep& s, const std::string& file, SourceLoc cpus_loc, SourceLoc memory_loc) {
    if (!s.cpus && !s.memory) return;
    // What the hosts declare (0: not declared, so not checked): runner.yml's, or the largest profile's.
    HostBudgetConfig most = project_.runner.host;
    std::string which = "runner.yml host:";
    if (project_.default_host && !project_.host_profiles.empty()) {
      most = {};
      for (const auto& h : project_.host_profiles) {
        most.cpus = std::max(most.cpus, h.host.host.cpus);
        most.memory = std::max(most.memory, h.host.host.memory);
      }
      which = "the largest host of ci/hosts/";
    }
    if (most.cpus && s.cpus > most.cpus)
      report_once(file, cpus_loc, "exceeds-host",
                  "step '" + s.name + "' asks for " + std::to_string(s.cpus) + " CPUs; " + which + " has " + std::to_string(most.cpus));
    if (most.memory && s.memory > most.memory)
      report_once(file, memory_loc, "exceeds-host",
                  "step '" + s.name + "' asks for " + format_bytes(s.memory) + " of memory; " + which + " has " + format_bytes(most.memory));
  }

  /// Why host `rc` cannot serve `devices` cards of `type` ("" when it can).
  static std::string pool_refusal(const RunnerConfig& rc, int gang, int pool, int devices, const std::string& type,
                                  const std::string& step_name) {
    std::vector<int> ids = rc.device_ids;
    std::string of_type;
    if (!type.empty()) {
      ids.clear();
      for (int id : rc.device_ids)
        if (rc.type_of(id) == type) ids.push_back(id);
      if (ids.empty()) {
        std::string known;
        for (const auto& t : rc.type_names()) known += (known.empty() ? "" : ", ") + t;
        return "step '" + step_name + "' needs cards of type '" + type + "'; no card of this host has it" +
               (known.empty() ? " (its cards have no type; set devices.type or devices.types in runner.yml)" : " (types: " + known + ")");
      }
      std::vector<std::vector<int>> groups;
      for (const auto& g : rc.device_groups) {
        std::vector<int> members;
        for (int id : g)
          if (rc.type_of(id) == type) members.push_back(id);
        if (!members.empty()) groups.push_back(members);
      }
      if (devices == 0) return "";
      pool = static_cast<int>(ids.size());
      gang = largest_gang(ids, rc.device_groups.empty() ? std::vector<std::vector<int>>{} : groups);
      of_type = " of type " + type;
    }
    if (devices <= gang) return "";
    if (devices > pool)
      return "step '" + step_name + "' needs " + std::to_string(devices) + " cards" + of_type + "; the pool has " +
             std::to_string(pool) + " (" + join_ids(ids) + ")";
    return "step '" + step_name + "' needs " + std::to_string(devices) + " cards" + of_type +
           " from one device group; the largest group has " + std::to_string(gang);
  }

  PlanJob job_leg(const JobDef& def, const MatrixLeg& leg, const Plan& plan) {
    PlanJob job;
    job.name = def.name;
    job.id = leg_display_name(def.name, leg);
    job.file = def.file;
    job.matrix = leg;
    job.needs = def.needs;
    if (def.toolchain) job.needs.insert(job.needs.begin(), "toolchain");
    job.if_expr = def.if_expr;
    ExpressionScope scope;
    scope.job = def.name;
    scope.has_matrix = def.matrix.has_value();
    for (const auto& [k, v] : leg) scope.matrix_keys.insert(k);
    for (const auto& need : def.needs)
      if (const JobDef* n = project_.find_job(need)) {
        auto& outs = scope.needs_outputs[need];
        for (const auto& [name, _] : n->outputs) outs.insert(name);
      }
    scope.steps_unavailable = "a job's env and if: are decided before any of its steps runs";
    check_condition(def.if_expr, def.file, def.if_loc, "if", scope);
    for (const auto& [k, v] : def.env) {
      job.env[k] = subst(v, leg, def.file, def.env_loc.line ? def.env_loc : def.loc);
      check_text(job.env[k], scope, def.file, def.env_loc.line ? def.env_loc : def.loc, "env." + k);
    }
    scope.steps_unavailable.clear();
    job.timeout_minutes = def.timeout_minutes;
    job.continue_on_error = def.continue_on_error;
    job.fail_fast = def.fail_fast;
    job.max_parallel = def.max_parallel.value_or(0);
    job.parallel = def.parallel;
    job.toolchain = def.toolchain;

    std::map<std::string, int> first_by_key;
    auto add_one = [&](PlanStep s) {
      s.index = static_cast<int>(job.steps.size());
      auto [it, fresh] = first_by_key.emplace(s.key, s.index);
      if (!fresh) s.deduplicated_from = it->second;
      job.steps.push_back(std::move(s));
    };
    // A split step becomes its collection and its shards (plan.h, PlanStep::split_shards); the same split step
    // twice is deduplicated whole, shard by shard.
    auto add = [&](PlanStep s) {
      if (s.split_shards < 2) {
        s.split_shards = 0;
        add_one(std::move(s));
        return;
      }
      PlanStep collect = s;
      collect.kind = StepKind::CollectTests;
      collect.name = s.name + " (collect)";
      collect.devices = 0, collect.cpus = 0, collect.memory = 0;
      collect.device_type.clear();
      collect.expected_minutes = 1, collect.expected_defaulted = true, collect.expected_source.clear();
      collect.key = s.key + "\ncollect";
      const int collect_index = static_cast<int>(job.steps.size());
      add_one(std::move(collect));
      for (int i = 1; i <= s.split_shards; ++i) {
        PlanStep shard = s;
        shard.id.clear();  // steps.ID is the collection's
        shard.name = s.name + " (shard " + std::to_string(i) + "/" + std::to_string(s.split_shards) + ")";
        shard.split_shards = 0;
        shard.shard = i, shard.shard_count = s.split_shards, shard.collect_step = collect_index;
        if (!s.expected_defaulted) shard.expected_minutes = s.expected_minutes / s.split_shards;
        shard.key = s.key + "\nshard " + std::to_string(i) + "/" + std::to_string(s.split_shards);
        add_one(std::move(shard));
      }
    };

    std::set<std::string> earlier_ids;
    for (const auto& sd : def.steps) {
      const std::string wd = subst(sd.working_directory.empty() ? def.default_working_directory
                                                                : sd.working_directory,
                                   leg, def.file, sd.loc);
      const std::string shell = !sd.shell.empty() ? sd.shell : !def.default_shell.empty() ? def.default_shell : "bash";
      std::map<std::string, std::string> env;
      for (const auto& [k, v] : sd.env) env[k] = subst(v, leg, def.file, sd.loc);
      std::map<std::string, std::string> caches;  // the job's, then the step's own for a name both give
      for (const auto* list : {&def.caches, &sd.caches})
        for (const CacheUse& c : *list) caches[c.name] = c.var;
      const std::optional<ReuseSpec>& reuse = sd.reuse ? sd.reuse : def.reuse;
      const bool status_fn = [&] {
        std::string err;
        auto c = sd.if_expr.empty() ? std::nullopt : Condition::parse(sd.if_expr, err);
        return c && c->has_status_function();
      }();
      // In a parallel job the plain steps run at once: only a cleanup step (its if: calls a status function,
      // so it runs after the others) can read their steps.* outputs.
      scope.step_ids = def.parallel && !status_fn ? std::set<std::string>{} : earlier_ids;
      if (def.parallel && !status_fn)
        scope.steps_unavailable = "in a parallel job the plain steps run at once; only a step whose if: calls a status "
                                  "function (it runs after them) can read steps.*";
      check_condition(sd.if_expr, def.file, sd.if_loc.line ? sd.if_loc : sd.loc, "if", scope);
      // Each finding at the value it is about (the step's first line when the value is the job's default).
      auto at = [&](const SourceLoc& l) { return l.line ? l : sd.loc; };
      check_text(wd, scope, def.file, at(sd.working_directory_loc), "working-directory");
      for (const auto& [k, v] : env) {
        auto l = sd.env_locs.find(k);
        check_text(v, scope, def.file, at(l == sd.env_locs.end() ? SourceLoc{} : l->second), "env." + k);
      }
      check_text(sd.run, scope, def.file, at(sd.run_loc), "run");
      check_text(sd.name, scope, def.file, at(sd.name_loc), "name");
      scope.steps_unavailable.clear();
      if (!sd.id.empty()) earlier_ids.insert(sd.id);

      std::optional<int> explicit_devices;
      if (!sd.devices.empty()) {
        std::string text = subst(sd.devices, leg, def.file, sd.devices_loc);
        char* end = nullptr;
        long n = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end || n < 0 || n > (1 << 20))
          report_once(def.file, sd.devices_loc, "bad-value",
                      "step: 'devices' must be a non-negative integer, got '" + text + "'");
        else
          explicit_devices = static_cast<int>(n);
      }

      if (sd.models.empty()) {
        PlanStep s;
        s.id = sd.id;
        s.name = subst(sd.name.empty() ? "Run " + first_line(sd.run) : sd.name, leg, def.file, sd.loc);
        s.run = subst(sd.run, leg, def.file, sd.loc);
        s.shell = shell;
        s.working_directory = wd;
        s.env = env;
        s.caches = caches;
        if (reuse) {
          s.reuse = reuse->enabled;
          s.reuse_inputs = reuse->inputs;
        }
        s.if_expr = sd.if_expr;
        s.if_has_status_function = status_fn;
        s.devices = explicit_devices.value_or(0);
        s.cpus = sd.cpus.value_or(0);
        s.memory = sd.memory.value_or(0);
        s.device_type = sd.device_type;
        s.timeout_minutes = sd.timeout_minutes;
        s.queue_timeout_minutes = sd.queue_timeout_minutes;
        s.run_timeout_minutes = sd.run_timeout_minutes;
        if (sd.expected_minutes) s.expected_minutes = *sd.expected_minutes, s.expected_defaulted = false, s.expected_source = "expected-minutes";
        s.continue_on_error = sd.continue_on_error;
        s.retry = sd.retry;
        s.tests = sd.tests;
          s.split_shards = sd.split_shards;
        set_perf(s, sd.perf);
        s.origin = s.source = where(def.file, sd.loc);
        s.key = step_key({s.run, s.env, s.working_directory, s.shell, s.devices, s.if_expr, "", nullptr, s.device_type});
        check_pool(s.devices, s.device_type, s.name, def.file,
                   sd.device_type_loc.line ? sd.device_type_loc : sd.devices_loc.line ? sd.devices_loc : sd.loc, plan);
        check_host(s, def.file, sd.cpus_loc, sd.memory_loc);
        add(std::move(s));
        continue;
      }
      for (std::size_t mi = 0; mi < sd.models.size(); ++mi) {
        auto mit = project_.models.find(sd.models[mi]);
        if (mit == project_.models.end()) continue;  // reported by load_project
        const ModelFile& mf = mit->second;
        SourceLoc entry_loc = mi < sd.model_locs.size() ? sd.model_locs[mi] : sd.loc;
        for (const auto& ex : mf.examples) {
          PlanStep s;
          std::string tmpl = sd.name.empty() ? "Run {model} {example} example" : sd.name;
          s.name = subst(expand_braces(tmpl, {{"model", mf.model}, {"example", ex.name}, {"dir", mf.dir}}), leg,
                         def.file, sd.loc);
          // A model's command and args may use ${{ }} like a job's run: (the job's matrix, env, needs).
          s.run = subst(mf.command_for(ex), leg, mf.file, ex.loc);
          check_text(s.run, scope, mf.file, ex.loc, "command");
          s.shell = shell;
          s.working_directory = wd;
          s.env = env;
          for (const auto& [k, v] : ex.env) s.env[k] = v;
          s.caches = caches;
          if (reuse) {
            s.reuse = reuse->enabled;
            s.reuse_inputs = reuse->inputs;
          }
          s.if_expr = sd.if_expr;
          s.if_has_status_function = status_fn;
          set_perf(s, sd.perf ? sd.perf : ex.perf);
          s.devices = explicit_devices.value_or(ex.devices);
          s.cpus = sd.cpus ? *sd.cpus : ex.cpus.value_or(0);
          s.memory = sd.memory ? *sd.memory : ex.memory.value_or(0);
          s.device_type = !sd.device_type.empty() ? sd.device_type : ex.device_type;
          auto pick = [&](const std::optional<double>& step, const std::optional<double>& example,
                          const std::optional<double>& model) { return step ? step : example ? example : model; };
          s.timeout_minutes = pick(sd.timeout_minutes, ex.timeout_minutes, mf.timeout_minutes);
          s.queue_timeout_minutes = pick(sd.queue_timeout_minutes, ex.queue_timeout_minutes, mf.queue_timeout_minutes);
          s.run_timeout_minutes = pick(sd.run_timeout_minutes, ex.run_timeout_minutes, mf.run_timeout_minutes);
          auto expected = sd.expected_minutes ? sd.expected_minutes
                          : ex.expected_minutes ? ex.expected_minutes
                                                : mf.expected_minutes;
          if (expected) s.expected_minutes = *expected, s.expected_defaulted = false, s.expected_source = "expected-minutes";
          s.continue_on_error = sd.continue_on_error;
          s.retry = sd.retry;
          s.tests = sd.tests;
          s.split_shards = sd.split_shards;
        set_perf(s, sd.perf);
          s.origin = where(def.file, entry_loc);
          s.source = where(mf.file, ex.loc);
          s.model = mf.id;
          s.example = ex.name;
          s.key = step_key({s.run, s.env, s.working_directory, s.shell, s.devices, s.if_expr, "", nullptr, s.device_type});
          if (explicit_devices || !sd.device_type.empty())
            check_pool(s.devices, s.device_type, s.name, def.file, sd.device_type_loc.line ? sd.device_type_loc : sd.devices_loc, plan);
          else check_pool(s.devices, s.device_type, s.name, mf.file, ex.loc, plan);
          if (sd.cpus || sd.memory) check_host(s, def.file, sd.cpus_loc, sd.memory_loc);
          else check_host(s, mf.file, ex.cpus_loc, ex.memory_loc);
          add(std::move(s));
        }
      }
    }
    scope.step_ids = earlier_ids;
    for (std::size_t i = 0; i < def.outputs.size(); ++i) {
      const auto& [name, expr] = def.outputs[i];
      SourceLoc l = i < def.output_locs.size() ? def.output_locs[i] : def.loc;
      job.outputs.emplace_back(name, subst(expr, leg, def.file, l));
      check_text(job.outputs.back().second, scope, def.file, l, "outputs." + name);
    }
    return job;
  }

  static std::string first_line(const std::string& run) {
    std::string line = run.substr(0, run.find('\n'));
    if (line.size() > 60) line = line.substr(0, 57) + "...";
    return line;
  }

  const Project& project_;
  const PlanOptions& opts_;
  Diagnostics& diags_;
  std::set<std::string> reported_;
};

}  // namespace

Plan build_plan(const Project& project, const PlanOptions& opts, Diagnostics& diags) {
  return Builder(project, opts, diags).build();
}

}  // namespace pto
