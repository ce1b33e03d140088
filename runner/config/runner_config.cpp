#include "config/runner_config.h"

#include <fnmatch.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>

#include <algorithm>
#include <cstdlib>
#include <regex>

#include <boost/asio/ip/address.hpp>

#include "config/device_spec.h"
#include "config/yaml_map.h"

namespace pto {

std::string to_string(Containment c) { return c == Containment::Sweep ? "sweep" : "cgroup"; }
std::string to_string(ExecutorKind e) { return e == ExecutorKind::Slurm ? "slurm" : "local"; }


std::string RunnerConfig::type_of(int card) const {
  if (!device_type_all.empty()) return device_type_all;
  auto it = device_types.find(card);
  return it == device_types.end() ? "" : it->second;
}

std::vector<std::string> RunnerConfig::files_of_card(int id) const { return card_files_of(card_files, id); }

std::vector<std::string> RunnerConfig::all_card_files() const {
  std::vector<std::string> out;
  for (int id : device_ids)
    for (auto& f : files_of_card(id)) out.push_back(std::move(f));
  return out;
}

std::vector<std::string> card_files_of(const std::vector<std::string>& patterns, int id) {
  std::vector<std::string> out;
  for (std::string f : patterns) {
    for (std::size_t p; (p = f.find("{id}")) != std::string::npos;) f.replace(p, 4, std::to_string(id));
    out.push_back(f);
  }
  return out;
}

int RunnerConfig::largest_gang() const { return pto::largest_gang(device_ids, device_groups); }

std::set<std::string> RunnerConfig::type_names() const {
  std::set<std::string> out;
  for (int id : device_ids)
    if (std::string t = type_of(id); !t.empty()) out.insert(t);
  return out;
}

std::string expand_home(const std::string& path) {
  if (path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    return std::string(home ? home : "/root") + path.substr(1);
  }
  return path;
}

/// `item` as an integer within [lo, hi], or nothing.
static std::optional<int> int_in(const YAML::Node& item, long lo, long hi) {
  char* end = nullptr;
  const long n = item.IsScalar() ? std::strtol(item.Scalar().c_str(), &end, 10) : -1;
  if (!item.IsScalar() || item.Scalar().empty() || *end || n < lo || n > hi) return std::nullopt;
  return static_cast<int>(n);
}

static std::vector<int> read_int_list(MapReader& m, const std::string& key, int lo, int hi) {
  std::vector<int> out;
  YAML::Node list = m.get(key);
  if (!list.IsDefined()) return out;
  if (!list.IsSequence()) {
    m.error_at(list, "wrong-type", m.what() + ": '" + key + "' expects a list of integers");
    return out;
  }
  for (const auto& item : list) {
    if (auto n = int_in(item, lo, hi)) out.push_back(*n);
    else
      m.error_at(item, "bad-value",
                 m.what() + ": '" + key + "' items must be integers " + std::to_string(lo) + "-" + std::to_string(hi) + ", got " +
                     describe_node(item));
  }
  return out;
}

std::pair<int, std::string> RunnerConfig::priority_of(const std::string& ref) const {
  for (const auto& r : priorities)
    if (fnmatch(r.ref.c_str(), ref.c_str(), 0) == 0) return {r.priority, r.ref};
  return {0, ""};
}

// Each section of runner.yml is read by its own function below, in the file's order of concerns: the cards,
// where the service listens and who may call it, how steps run, Slurm, card health, the source repository,
// the steps' environment, the queue's priorities, the sandbox, retention. Each reads its part of `m` into
// `cfg` and reports what is wrong where it is written.

static void read_devices(MapReader& m, RunnerConfig& cfg) {
  MapReader d(m.get("devices"), "devices", {"ids", "groups", "lock-dir", "lock-name", "type", "types", "card-files", "shared-files"}, m.file(), m.diags());
  if (!d.is_map()) return;
  if (d.has("ids")) {
    auto ids = read_int_list(d, "ids", 0, 4095);
    if (ids.empty()) d.error_at(d.get("ids"), "bad-value", "devices: 'ids' must list at least one card");
    else cfg.device_ids = ids;
  }
  if (d.has("groups")) {
    YAML::Node groups = d.get("groups");
    if (!groups.IsSequence()) {
      d.error_at(groups, "wrong-type", "devices: 'groups' expects a list of lists, e.g. [[0, 1], [2, 3]]");
    } else {
      for (const auto& g : groups) {
        if (!g.IsSequence()) {
          d.error_at(g, "wrong-type", "devices: each group is a list of card ids, got " + describe_node(g));
          continue;
        }
        std::vector<int> ids;
        for (const auto& item : g) {
          if (auto id = int_in(item, 0, 4095)) ids.push_back(*id);
          else d.error_at(item, "bad-value", "devices: group members are card ids, got " + describe_node(item));
        }
        cfg.device_groups.push_back(ids);
      }
      std::string problem = check_device_groups(cfg.device_ids, cfg.device_groups);
      if (!problem.empty()) d.error_at(groups, "bad-value", "devices: " + problem);
    }
  }
  if (auto v = d.string("lock-dir")) cfg.lock_dir = *v;
  if (auto v = d.string("lock-name")) {
    cfg.lock_name = *v;
    if (v->find("{id}") == std::string::npos || v->find('/') != std::string::npos || v->find("..") != std::string::npos)
      d.error_at(d.get("lock-name"), "bad-value",
                 "devices: 'lock-name' is a file name with {id}, e.g. npu_device_{id}.lock; got '" + *v + "'");
  }
  if (auto v = d.strings("card-files", true)) {
    cfg.card_files = *v;
    for (const auto& f : *v)
      if (f.find("{id}") == std::string::npos || f.rfind("/", 0) != 0)
        d.error_at(d.get("card-files"), "bad-value", "devices: 'card-files' are absolute paths with {id}, e.g. /dev/davinci{id}; got '" + f + "'");
  }
  if (auto v = d.strings("shared-files", true)) {
    cfg.shared_files = *v;
    for (const auto& f : *v)
      if (f.rfind("/", 0) != 0) d.error_at(d.get("shared-files"), "bad-value", "devices: 'shared-files' are absolute paths; got '" + f + "'");
  }
  static const std::regex type_re("[A-Za-z0-9_.-]{1,64}");
  if (auto v = d.string("type")) {
    cfg.device_type_all = *v;
    if (!std::regex_match(*v, type_re)) d.error_at(d.get("type"), "bad-value", "devices: 'type' must be a name like a5, got '" + *v + "'");
    if (d.has("types")) d.error_at(d.get("types"), "bad-value", "devices: give 'type' (every card) or 'types' (by card), not both");
  }
  if (d.has("types")) {
    YAML::Node types = d.get("types");
    if (!types.IsMap()) {
      d.error_at(types, "wrong-type", "devices: 'types' expects a mapping of NAME: [card ids], e.g. {a5: [8, 9]}");
    } else {
      for (auto it = types.begin(); it != types.end(); ++it) {
        const std::string name = it->first.Scalar();
        if (!std::regex_match(name, type_re))
          d.error_at(it->first, "bad-value", "devices: type names are like a5 or a2a3, got '" + name + "'");
        if (!it->second.IsSequence()) {
          d.error_at(it->second, "wrong-type", "devices: types." + name + " expects a list of card ids");
          continue;
        }
        for (const auto& item : it->second) {
          const std::optional<int> card = int_in(item, 0, 4095);
          if (!card) {
            d.error_at(item, "bad-value", "devices: types." + name + " lists card ids, got " + describe_node(item));
            continue;
          }
          const int id = *card;
          if (std::find(cfg.device_ids.begin(), cfg.device_ids.end(), id) == cfg.device_ids.end())
            d.error_at(item, "bad-value", "devices: card " + std::to_string(id) + " of types." + name + " is not in the device ids");
          auto [at, fresh] = cfg.device_types.emplace(id, name);
          if (!fresh && at->second != name)
            d.error_at(item, "bad-value", "devices: card " + std::to_string(id) + " is both " + at->second + " and " + name);
        }
      }
    }
  }
}

static void read_service(MapReader& m, RunnerConfig& cfg) {
  if (auto v = m.string("state-dir")) cfg.state_dir = *v;
  if (auto v = m.string("cache-dir")) cfg.cache_dir = *v;
  if (auto v = m.string("toolchain-mirror")) cfg.toolchain_mirror = *v;
  if (auto v = m.string("listen")) {
    cfg.listen = *v;
    auto colon = v->rfind(':');
    if (colon == std::string::npos || colon + 1 == v->size() ||
        v->find_first_not_of("0123456789", colon + 1) != std::string::npos)
      m.error_at(m.get("listen"), "bad-value", "'listen' must be ADDRESS:PORT, e.g. 127.0.0.1:8787; got '" + *v + "'");
  }
  if (auto v = m.string("steps-listen")) {
    boost::system::error_code ec;
    const auto colon = v->rfind(':');
    const std::string address = colon == std::string::npos ? "" : v->substr(0, colon);
    const auto parsed = boost::asio::ip::make_address(address, ec);
    if (colon == std::string::npos || colon + 1 == v->size() || v->size() - colon > 6 ||
        v->find_first_not_of("0123456789", colon + 1) != std::string::npos || std::stol(v->substr(colon + 1)) > 65535 || ec ||
        !parsed.is_loopback())
      m.error_at(m.get("steps-listen"), "bad-value",
                 "'steps-listen' must be a loopback ADDRESS:PORT, e.g. 127.0.0.1:8788 (port 0: any, kept across restarts); got '" + *v + "'");
    else
      cfg.steps_listen = *v;
  }
  if (auto v = m.string("token-file")) cfg.token_file = *v;
  if (auto v = m.string("read-token-file")) cfg.read_token_file = *v;
  if (auto v = m.string("listen-unix")) {
    if (v->empty() || (*v)[0] != '/') m.error_at(m.get("listen-unix"), "bad-value", "'listen-unix' is an absolute path, e.g. /run/pto-runner/api.sock");
    else cfg.listen_unix = *v;
  }
  if (auto v = m.string("submit-group")) cfg.submit_group = *v;
  if (!cfg.submit_group.empty() && cfg.listen_unix.empty() && m.has("submit-group"))
    m.error_at(m.get("submit-group"), "bad-value", "'submit-group' names who may submit over 'listen-unix', which is not set");
  if (auto v = m.boolean("insecure-listen")) cfg.insecure_listen = *v;
  if (auto v = m.integer("max-connections-per-client", 1, 100000)) cfg.max_connections_per_client = static_cast<int>(*v);
  if (auto v = m.number("request-timeout-seconds", 0.1, 3600)) cfg.request_timeout_seconds = *v;
  if (auto v = m.integer("max-cards-per-run", 1, 4096)) cfg.max_cards_per_run = static_cast<int>(*v);
  if (m.has("tls")) {
    MapReader t(m.get("tls"), "tls", {"cert", "key"}, m.file(), m.diags());
    if (t.is_map()) {
      if (auto v = t.string("cert", true)) cfg.tls_cert = *v;
      if (auto v = t.string("key", true)) cfg.tls_key = *v;
    }
  }
}

static void read_steps(MapReader& m, RunnerConfig& cfg) {
  if (auto v = m.number("kill-grace-seconds", 0, 600)) cfg.kill_grace_seconds = *v;
  if (auto v = m.number("shutdown-timeout-minutes", 0, 7 * 24 * 60)) cfg.shutdown_timeout_minutes = *v;
  if (auto v = m.string("containment")) {
    cfg.containment = *v == "sweep" ? Containment::Sweep : Containment::Cgroup;
    if (*v != "cgroup" && *v != "sweep")
      m.error_at(m.get("containment"), "bad-value", "'containment' is cgroup or sweep, got '" + *v + "'");
  }
  if (auto v = m.string("executor")) {
    cfg.executor = *v == "slurm" ? ExecutorKind::Slurm : ExecutorKind::Local;
    if (*v != "local" && *v != "slurm")
      m.error_at(m.get("executor"), "bad-value", "'executor' is local or slurm, got '" + *v + "'");
  }
  if (auto v = m.boolean("supervise")) cfg.supervise = *v;
  if (auto v = m.number("log-max-mb", 0, 1 << 20)) cfg.log_max_bytes = static_cast<std::uint64_t>(*v * (1 << 20));
}

static void read_slurm(MapReader& m, RunnerConfig& cfg, const YAML::Node& doc) {
  if (m.has("slurm")) {
    MapReader sl(m.get("slurm"), "slurm", {"partition", "args", "gres", "group-types", "poll-seconds", "max-cards"}, m.file(), m.diags());
    if (sl.is_map()) {
      if (auto v = sl.string("partition")) cfg.slurm.partition = *v;
      if (auto v = sl.strings("args", true)) cfg.slurm.args = *v;
      // Options that would redirect or relabel srun's output hide the step's placement line, or take the
      // job out of its one node and one task.
      static const std::regex taken("^(-[loeiNnJ](=.*)?|-[loeiNnJ].+|--(label|output|error|input|open-mode|pty|nodes|ntasks|"
                                    "jobid|job-name|comment|gres|het-group|overlap)(=.*)?)$");
      for (const auto& a : cfg.slurm.args) {
        if (a.rfind("-", 0) != 0)
          sl.error_at(sl.get("args"), "bad-value", "slurm: 'args' are srun options like --account=ci, got '" + a + "'");
        else if (std::regex_match(a, taken))
          sl.error_at(sl.get("args"), "bad-value", "slurm: 'args' cannot set '" + a + "': pto-runner sets it for each step (or reads the step's output through it)");
      }
      static const std::regex name_re("[A-Za-z0-9_.-]{1,64}");
      if (auto v = sl.string("gres")) {
        cfg.slurm.gres = *v;
        if (!std::regex_match(*v, name_re)) sl.error_at(sl.get("gres"), "bad-value", "slurm: 'gres' is a GRES name like npu, got '" + *v + "'");
      }
      if (auto v = sl.strings("group-types")) {
        cfg.slurm.group_types = *v;
        for (const auto& t : *v)
          if (!std::regex_match(t, name_re))
            sl.error_at(sl.get("group-types"), "bad-value", "slurm: 'group-types' are GRES type names like g0, got '" + t + "'");
      }
      if (auto v = sl.number("poll-seconds", 0.05, 60)) cfg.slurm.poll_seconds = *v;
      if (auto v = sl.integer("max-cards", 0, 1000000)) cfg.slurm.max_cards = static_cast<int>(*v);
    }
  }
  if (cfg.executor == ExecutorKind::Slurm && !cfg.slurm.group_types.empty() && cfg.slurm.group_types.size() != cfg.device_groups.size())
    m.error_at(m.has("slurm") ? m.get("slurm") : doc, "bad-value",
               "slurm: 'group-types' names " + std::to_string(cfg.slurm.group_types.size()) + " GRES type(s) for " +
                   std::to_string(cfg.device_groups.size()) + " devices.groups; give one per group");
}

static void read_health(MapReader& m, RunnerConfig& cfg) {
  MapReader h(m.get("health"), "health",
              {"infra-exit-codes", "infra-signals", "check", "check-timeout-seconds", "drain-after", "fault-patterns",
               "window-minutes", "bad-after-runs", "max-auto-drained", "preflight", "reset", "return-after", "probe-interval-seconds", "retire-after",
               "poison-patterns"},
              m.file(), m.diags());
  if (h.is_map()) {
    if (auto v = h.number("window-minutes", 1, 7 * 24 * 60)) cfg.health.window_minutes = *v;
    if (auto v = h.string("preflight")) cfg.health.preflight = *v;
    if (auto v = h.string("reset")) cfg.health.reset = *v;
    if (auto v = h.integer("return-after", 1, 1000)) cfg.health.return_after = static_cast<int>(*v);
    if (auto v = h.integer("retire-after", 0, 1000)) cfg.health.retire_after = static_cast<int>(*v);
    if (auto v = h.number("probe-interval-seconds", 0.05, 86400)) cfg.health.probe_interval_seconds = *v;
    if (auto v = h.integer("bad-after-runs", 1, 100)) cfg.health.bad_after_runs = static_cast<int>(*v);
    if (auto v = h.integer("max-auto-drained", 0, 4096)) cfg.health.max_auto_drained = static_cast<int>(*v);
    if (h.has("fault-patterns")) {
      YAML::Node list = h.get("fault-patterns");
      if (!list.IsSequence()) {
        h.error_at(list, "wrong-type", "health: 'fault-patterns' expects a list of {pattern: REGEX, cause: card|infra, card-group: N}");
      } else {
        for (const auto& item : list) {
          MapReader f(item, "fault-patterns", {"pattern", "cause", "card-group"}, m.file(), m.diags());
          if (!f.is_map()) continue;
          FaultPattern fp;
          if (auto v = f.string("pattern", true)) {
            fp.pattern = *v;
            try {
              fp.re = std::make_shared<const std::regex>(*v, std::regex::ECMAScript | std::regex::optimize);
            } catch (const std::regex_error& e) {
              f.error_at(f.get("pattern"), "bad-value", "fault-patterns: '" + *v + "' is not a regular expression (" + e.what() + ")");
            }
          }
          if (auto v = f.string("cause")) {
            auto c = failure_cause_named(*v);
            if (!c || (*c != FailureCause::Card && *c != FailureCause::Infra))
              f.error_at(f.get("cause"), "bad-value", "fault-patterns: 'cause' is card or infra, got '" + *v + "'");
            else
              fp.cause = *c;
          }
          if (auto v = f.integer("card-group", 0, 20)) fp.card_group = static_cast<int>(*v);
          if (fp.re && fp.card_group > static_cast<int>(fp.re->mark_count()))
            f.error_at(f.get("card-group"), "bad-value", "fault-patterns: card-group " + std::to_string(fp.card_group) + " but '" +
                                                             fp.pattern + "' has " + std::to_string(fp.re->mark_count()) + " group(s)");
          if (fp.re) cfg.health.fault_patterns.push_back(std::move(fp));
        }
      }
    }
    if (h.has("poison-patterns")) {
      YAML::Node list = h.get("poison-patterns");
      if (!list.IsSequence()) {
        h.error_at(list, "wrong-type", "health: 'poison-patterns' expects a list of regular expressions");
      } else {
        cfg.health.poison_patterns.clear();
        for (const auto& item : list) {
          if (!item.IsScalar()) {
            h.error_at(item, "wrong-type", "poison-patterns: each entry is a regular expression (a string)");
            continue;
          }
          try {
            cfg.health.poison_patterns.push_back(
                {item.Scalar(), std::make_shared<const std::regex>(item.Scalar(), std::regex::ECMAScript | std::regex::optimize), FailureCause::Card, 0});
          } catch (const std::regex_error& e) {
            h.error_at(item, "bad-value", "poison-patterns: '" + item.Scalar() + "' is not a regular expression (" + e.what() + ")");
          }
        }
      }
    }
    cfg.health.infra_exit_codes = read_int_list(h, "infra-exit-codes", 1, 255);
    cfg.health.infra_signals = read_int_list(h, "infra-signals", 1, 64);
    if (auto v = h.string("check")) cfg.health.check = *v;
    if (auto v = h.number("check-timeout-seconds", 0.01, 3600)) cfg.health.check_timeout_seconds = *v;
    if (auto v = h.integer("drain-after", 1, 1000)) cfg.health.drain_after = static_cast<int>(*v);
  }
}

std::vector<FaultPattern> default_poison_patterns() {
  std::vector<FaultPattern> out;
  for (const char* p : {"chip run lane is poisoned", "device is already owned by another live ChipWorker"})
    out.push_back({p, std::make_shared<const std::regex>(p, std::regex::ECMAScript | std::regex::optimize), FailureCause::Card, 0});
  return out;
}

static void read_source(MapReader& m, RunnerConfig& cfg) {
  MapReader s(m.get("source"), "source",
              {"repo", "mirror", "submodules", "submodule-urls", "lock-timeout-seconds", "fetch-timeout-seconds", "keep-worktrees"},
              m.file(), m.diags());
  if (s.is_map()) {
    if (auto v = s.string("repo")) cfg.source.repo = *v;
    else s.error_at(m.get("source"), "missing-key", "source: 'repo' (a git URL or path) is required");
    if (cfg.source.repo.empty() && s.has("repo")) s.error_at(s.get("repo"), "bad-value", "source: 'repo' is empty");
    if (cfg.source.repo.rfind("-", 0) == 0) s.error_at(s.get("repo"), "bad-value", "source: 'repo' cannot start with '-'");
    if (auto v = s.string("mirror")) cfg.source.mirror = *v;
    if (auto v = s.boolean("submodules")) cfg.source.submodules = *v;
    if (auto v = s.strings("submodule-urls")) {
      cfg.source.submodule_urls = *v;
      for (const auto& u : *v)
        if (u.empty() || u.find('\n') != std::string::npos || u.rfind("-", 0) == 0 || (u.find(':') == std::string::npos && u[0] != '/'))
          s.error_at(s.get("submodule-urls"), "bad-value",
                     "source: 'submodule-urls' are URL prefixes (https://host/) or absolute directories, got '" + u + "'");
    }
    if (auto v = s.number("lock-timeout-seconds", 0, 86400)) cfg.source.lock_timeout_seconds = *v;
    if (auto v = s.number("fetch-timeout-seconds", 1, 86400)) cfg.source.fetch_timeout_seconds = *v;
    if (auto v = s.integer("keep-worktrees", 0, 100000)) cfg.source.keep_worktrees = static_cast<int>(*v);
  }
}

static void read_env(MapReader& m, RunnerConfig& cfg) {
  if (m.has("env")) {
    static const std::regex name_re("[A-Za-z_][A-Za-z0-9_]*");
    YAML::Node env = m.get("env");
    if (!env.IsMap()) {
      m.error_at(env, "wrong-type", "'env' expects a mapping of NAME: value");
    } else {
      for (auto it = env.begin(); it != env.end(); ++it) {
        const std::string name = it->first.Scalar();
        if (!std::regex_match(name, name_re)) m.error_at(it->first, "bad-value", "env: '" + name + "' is not a variable name");
        else if (!it->second.IsScalar()) m.error_at(it->second, "wrong-type", "env." + name + " must be a string, got " + describe_node(it->second));
        else if (name.rfind("PTO_RUNNER_", 0) == 0) m.error_at(it->first, "bad-value", "env: PTO_RUNNER_* are pto-runner's own variables");
        else cfg.env[name] = it->second.Scalar();
      }
    }
  }
  if (auto v = m.string("env-file")) cfg.env_file = *v;
}

static void read_priorities(MapReader& m, RunnerConfig& cfg) {
  if (m.has("priorities")) {
    YAML::Node list = m.get("priorities");
    if (!list.IsSequence()) {
      m.error_at(list, "wrong-type", "'priorities' expects a list of {ref: GLOB, priority: N}, e.g. [{ref: refs/heads/main, priority: 10}]");
    } else {
      cfg.priorities.clear();  // the file's list replaces the defaults
      for (const auto& item : list) {
        MapReader e(item, "priorities", {"ref", "priority"}, m.file(), m.diags());
        if (!e.is_map()) continue;
        PriorityRule rule;
        if (auto v = e.string("ref", true)) rule.ref = *v;
        if (auto v = e.integer("priority", -1000, 1000)) rule.priority = static_cast<int>(*v);
        else if (!e.has("priority")) e.error_at(item, "missing-key", "priorities: required key 'priority' (an integer, higher first) is missing");
        cfg.priorities.push_back(rule);
      }
    }
  }
  if (auto v = m.string("supersede")) {
    cfg.supersede = *v == "off" ? Supersede::Off : Supersede::PullRequest;
    if (*v != "off" && *v != "pull-request")
      m.error_at(m.get("supersede"), "bad-value", "'supersede' is pull-request or off, got '" + *v + "'");
  }
}

static void read_sandbox(MapReader& m, RunnerConfig& cfg) {
  YAML::Node sb = m.get("sandbox");
  if (sb.IsScalar() && (sb.Scalar() == "off" || sb.Scalar() == "false")) {
    cfg.sandbox.enabled = false;
  } else {
    MapReader b(sb, "sandbox", {"users", "count", "groups", "pids-max", "memory-max"}, m.file(), m.diags());
    if (b.is_map()) {
      static const std::regex user_re("[a-z_][a-z0-9_-]{0,24}");
      if (auto v = b.string("users")) {
        cfg.sandbox.users = *v;
        if (!std::regex_match(*v, user_re))
          b.error_at(b.get("users"), "bad-value", "sandbox: 'users' is a user-name prefix like pto-step, got '" + *v + "'");
      }
      if (auto v = b.integer("count", 1, 4096)) cfg.sandbox.count = static_cast<int>(*v);
      if (auto v = b.strings("groups")) cfg.sandbox.groups = *v;
      if (auto v = b.integer("pids-max", 16, 10000000)) cfg.sandbox.pids_max = static_cast<std::uint64_t>(*v);
      if (auto v = b.size("memory-max", 1 << 20)) cfg.sandbox.memory_max = *v;
    }
  }
}

static void read_host(MapReader& m, RunnerConfig& cfg) {
  MapReader h(m.get("host"), "host", {"cpus", "memory"}, m.file(), m.diags());
  if (!h.is_map()) return;
  if (auto v = h.integer("cpus", 1, 65536)) cfg.host.cpus = static_cast<int>(*v);
  if (auto v = h.size("memory", 1 << 20)) cfg.host.memory = *v;
}

HostBudget host_budget(const HostBudgetConfig& cfg) {
  HostBudget b{cfg.cpus, cfg.memory};
  if (!b.cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    b.cpus = ::sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    if (b.cpus < 1) b.cpus = 1;
  }
  if (!b.memory) {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    while (in >> key >> kib) {
      if (key == "MemTotal:") break;
      in.ignore(256, '\n');
    }
    b.memory = kib * 1024;
  }
  return b;
}

static void read_caches(MapReader& m, RunnerConfig& cfg) {
  MapReader c(m.get("caches"), "caches", {"dir", "protected-refs", "max-size", "pr-max-age-days", "group", "remote"}, m.file(), m.diags());
  if (!c.is_map()) return;
  const SourceLoc at = loc_of(m.get("caches"));
  cfg.caches.line = at.line;
  cfg.caches.col = at.col;
  if (auto v = c.string("dir")) cfg.caches.dir = *v;
  if (auto v = c.strings("protected-refs", true)) {
    cfg.caches.protected_refs = *v;
    for (const std::string& r : *v)
      if (r.rfind("refs/", 0) != 0)
        c.error_at(c.get("protected-refs"), "bad-value", "caches: 'protected-refs' are full refs like refs/heads/main, got '" + r + "'");
  }
  if (auto v = c.size("max-size", 1 << 20)) cfg.caches.max_size = *v;
  if (auto v = c.number("pr-max-age-days", 0.001, 3650)) cfg.caches.pr_max_age_days = *v;
  if (auto v = c.string("group")) cfg.caches.group = *v;
  if (!c.has("remote")) return;
  MapReader r(c.get("remote"), "caches.remote", {"url", "credential-file"}, m.file(), m.diags());
  if (!r.is_map()) return;
  if (auto v = r.string("url")) {
    cfg.caches.remote_url = *v;
    if (v->rfind("http://", 0) != 0 && v->rfind("https://", 0) != 0)
      r.error_at(r.get("url"), "bad-value", "caches.remote: 'url' is http://HOST/PATH/ or https://..., got '" + *v + "'");
    else if (v->find('@') != std::string::npos)
      r.error_at(r.get("url"), "bad-value", "caches.remote: 'url' carries no credential; give it in 'credential-file'");
  }
  if (auto v = r.string("credential-file")) cfg.caches.remote_credential_file = *v;
  if (!cfg.caches.remote_url.empty() && cfg.caches.remote_credential_file.empty())
    r.error_at(c.get("remote"), "missing-key", "caches.remote: 'credential-file' (user:password, readable by root alone) is needed to write");
}

bool RunnerConfig::protected_ref(const std::string& ref) const {
  if (ref.empty()) return false;
  if (caches.protected_refs.empty()) return ref == main_ref || ref.rfind("refs/heads/gh-readonly-queue/", 0) == 0;
  for (const std::string& glob : caches.protected_refs)
    if (::fnmatch(glob.c_str(), ref.c_str(), 0) == 0) return true;
  return false;
}

static void read_retention(MapReader& m, RunnerConfig& cfg) {
  MapReader r(m.get("retention"), "retention", {"max-runs", "max-age-days"}, m.file(), m.diags());
  if (r.is_map()) {
    if (auto v = r.integer("max-runs", 0, 10000000)) cfg.retention.max_runs = static_cast<int>(*v);
    if (auto v = r.number("max-age-days", 0, 36500)) cfg.retention.max_age_days = *v;
  }
}

bool is_utc_date(const std::string& s) {
  static const std::regex date_re("([0-9]{4})-([0-9]{2})-([0-9]{2})");
  std::smatch m;
  if (!std::regex_match(s, m, date_re)) return false;
  const int y = std::stoi(m[1].str()), mo = std::stoi(m[2].str()), d = std::stoi(m[3].str());
  static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > days[mo - 1]) return false;
  return mo != 2 || d < 29 || (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
}

nlohmann::json TestMute::json() const {
  nlohmann::json j = {{"id", id}, {"reason", reason}, {"until", until}, {"by", by}};
  if (!at.empty()) j["at"] = at;
  return j;
}

static void read_tests(MapReader& m, RunnerConfig& cfg) {
  MapReader t(m.get("tests"), "tests", {"mute", "max-muted", "window-days", "retention-days", "max-report-bytes", "max-cases"}, m.file(),
              m.diags());
  if (auto v = t.size("max-report-bytes", 1024)) cfg.tests.max_report_bytes = *v;
  if (auto v = t.integer("max-cases", 1, 10000000)) cfg.tests.max_cases = static_cast<int>(*v);
  if (!t.is_map()) return;
  if (auto v = t.integer("max-muted", 0, 10000)) cfg.tests.max_muted = static_cast<int>(*v);
  if (auto v = t.number("window-days", 1, 3650)) cfg.tests.window_days = *v;
  if (auto v = t.number("retention-days", 1, 36500)) cfg.tests.retention_days = *v;
  if (!t.has("mute")) return;
  YAML::Node list = t.get("mute");
  if (!list.IsSequence()) {
    t.error_at(list, "wrong-type", "tests: 'mute' expects a list of {id: GLOB, reason: TEXT, until: YYYY-MM-DD}");
    return;
  }
  for (const auto& item : list) {
    MapReader e(item, "tests.mute", {"id", "reason", "until"}, m.file(), m.diags());
    if (!e.is_map()) continue;
    TestMute mute;
    mute.by = "runner.yml";
    mute.line = item.Mark().line + 1;
    mute.col = item.Mark().column + 1;
    if (auto v = e.string("id", true)) mute.id = *v;
    if (auto v = e.string("reason", true)) mute.reason = *v;
    if (auto v = e.string("until", true)) mute.until = *v;
    if (e.has("id") && mute.id.empty()) e.error_at(e.get("id"), "bad-value", "tests.mute: 'id' is empty (a test id or a glob such as tests/st/test_x.py::*)");
    if (e.has("reason") && mute.reason.empty()) e.error_at(e.get("reason"), "bad-value", "tests.mute: 'reason' is empty: say why (an issue link)");
    if (e.has("until") && !is_utc_date(mute.until))
      e.error_at(e.get("until"), "bad-value", "tests.mute: 'until' is a date like 2026-12-31, got '" + mute.until + "'");
    if (!mute.id.empty() && !mute.reason.empty() && is_utc_date(mute.until)) cfg.tests.mute.push_back(mute);
  }
  if (static_cast<int>(cfg.tests.mute.size()) > cfg.tests.max_muted)
    t.error_at(list, "bad-value", "tests: " + std::to_string(cfg.tests.mute.size()) + " mutes, more than max-muted (" +
                                      std::to_string(cfg.tests.max_muted) + "): fix the tests, or raise tests.max-muted");
}

std::string to_string(NotifyChannel c) {
  return c == NotifyChannel::Feishu ? "feishu" : c == NotifyChannel::Slack ? "slack" : "webhook";
}

const std::vector<std::string>& notify_event_names() {
  static const std::vector<std::string> names = {"card-bad",       "card-retired", "card-returned", "main-red",
                                                 "ran-no-tests",   "new-flaky-test", "queue-stuck", "bisect-done"};
  return names;
}

static void read_notify_receiver(const YAML::Node& item, MapReader& m, RunnerConfig& cfg) {
  MapReader e(item, "notify", {"name", "kind", "url", "secret-file", "events", "refs", "max-pending"}, m.file(), m.diags());
  if (!e.is_map()) return;
  NotifyReceiver r;
  r.line = item.Mark().line + 1;
  r.col = item.Mark().column + 1;
  if (auto v = e.string("name", true)) r.name = *v;
  if (auto v = e.string("kind", true)) {
    if (*v == "feishu") r.kind = NotifyChannel::Feishu;
    else if (*v == "slack") r.kind = NotifyChannel::Slack;
    else if (*v == "webhook") r.kind = NotifyChannel::Webhook;
    else e.error_at(e.get("kind"), "bad-value", "notify: 'kind' is feishu, slack or webhook, got '" + *v + "'");
  }
  if (auto v = e.string("url", true)) {
    r.url = *v;
    if (r.url.rfind("https://", 0) != 0 && r.url.rfind("http://", 0) != 0)
      e.error_at(e.get("url"), "bad-value", "notify: 'url' is an http(s) URL, got '" + (r.url.size() > 40 ? r.url.substr(0, 40) + "..." : r.url) + "'");
  }
  if (auto v = e.string("secret-file")) r.secret_file = *v;
  if (r.kind == NotifyChannel::Feishu && r.secret_file.empty() && e.has("kind"))
    e.error_at(item, "missing-key", "notify: a feishu receiver needs 'secret-file' (the bot's signing secret: Feishu refuses unsigned messages to a bot with one)");
  if (auto v = e.strings("events")) {
    for (const std::string& ev : *v)
      if (std::find(notify_event_names().begin(), notify_event_names().end(), ev) == notify_event_names().end()) {
        std::string known;
        for (const auto& n : notify_event_names()) known += (known.empty() ? "" : ", ") + n;
        e.error_at(e.get("events"), "bad-value", "notify: no event '" + ev + "' (events: " + known + ")");
      }
    r.events = *v;
  }
  if (auto v = e.strings("refs")) r.refs = *v;
  if (auto v = e.integer("max-pending", 1, 1000000)) r.max_pending = static_cast<int>(*v);
  for (const auto& other : cfg.notify.receivers)
    if (!r.name.empty() && other.name == r.name) e.error_at(e.get("name"), "bad-value", "notify: two receivers are named '" + r.name + "'");
  if (!r.name.empty() && !r.url.empty()) cfg.notify.receivers.push_back(std::move(r));
}

static void read_notify(MapReader& m, RunnerConfig& cfg) {
  YAML::Node node = m.get("notify");
  YAML::Node list = node;
  if (node.IsMap()) {  // the long form: {receivers: [...], queue-stuck-minutes, group-seconds}
    MapReader n(node, "notify", {"receivers", "queue-stuck-minutes", "group-seconds", "retry-max-seconds"}, m.file(), m.diags());
    if (auto v = n.number("queue-stuck-minutes", 0.01, 100000)) cfg.notify.queue_stuck_minutes = *v;
    if (auto v = n.number("group-seconds", 0, 3600)) cfg.notify.group_seconds = *v;
    if (auto v = n.number("retry-max-seconds", 1, 86400)) cfg.notify.retry_max_seconds = *v;
    list = n.get("receivers");
    if (!list) return;
  }
  if (!list.IsSequence()) {
    m.error_at(list, "wrong-type", "'notify' expects a list of receivers, e.g. [{name: oncall, kind: feishu, url: URL, secret-file: FILE}]");
    return;
  }
  for (const auto& item : list) read_notify_receiver(item, m, cfg);
}

static RunnerConfig load_runner_config_unguarded(const std::string& path, const std::string& display, Diagnostics& diags) {
  RunnerConfig cfg;
  cfg.file = display;
  auto doc = load_yaml_file(path, display, diags);
  if (!doc) return cfg;
  if (doc->IsNull()) return cfg;  // an empty runner.yml means "all defaults"
  MapReader m(*doc, "runner.yml",
              {"devices", "state-dir", "cache-dir", "toolchain-mirror", "listen", "steps-listen", "token-file", "health",
               "kill-grace-seconds", "source", "retention", "log-max-mb", "containment", "supervise",
               "shutdown-timeout-minutes", "executor", "slurm", "env", "env-file", "sandbox", "read-token-file", "tls",
               "insecure-listen", "max-connections-per-client", "request-timeout-seconds", "max-cards-per-run", "priorities", "supersede", "listen-unix", "submit-group", "tests", "host", "notify", "main-branch", "caches", "reuse"},
              display, diags);
  if (!m.is_map()) return cfg;
  if (m.has("devices")) read_devices(m, cfg);
  read_service(m, cfg);
  read_steps(m, cfg);
  read_slurm(m, cfg, *doc);
  if (m.has("health")) read_health(m, cfg);
  if (m.has("source")) read_source(m, cfg);
  read_env(m, cfg);
  read_priorities(m, cfg);
  if (m.has("sandbox")) read_sandbox(m, cfg);
  if (m.has("retention")) read_retention(m, cfg);
  if (m.has("caches")) read_caches(m, cfg);
  if (m.has("reuse")) {
    MapReader r(m.get("reuse"), "reuse", {"max-age-days"}, display, diags);
    if (auto v = r.number("max-age-days", 0, 3650)) cfg.reuse_max_age_days = *v;
  }
  if (m.has("tests")) read_tests(m, cfg);
  if (m.has("host")) read_host(m, cfg);
  if (m.has("notify")) read_notify(m, cfg);
  if (auto v = m.string("main-branch")) {
    cfg.main_ref = v->rfind("refs/", 0) == 0 ? *v : "refs/heads/" + *v;
    if (v->empty() || v->find_first_of(" ~^:?*[\\") != std::string::npos)
      m.error_at(m.get("main-branch"), "bad-value", "'main-branch' is a branch name like main, got '" + *v + "'");
  }
  return cfg;
}

RunnerConfig load_runner_config(const std::string& path, const std::string& display, Diagnostics& diags) {
  RunnerConfig out; out.file = display;
  guard_yaml(display, diags, [&] { out = load_runner_config_unguarded(path, display, diags); });
  return out;
}

}  // namespace pto
