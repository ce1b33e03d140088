#include "exec/step_limits.h"

#include "exec/cgroup_files.h"

#include "exec/cgroup_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdlib>
#include <map>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

namespace pto {

namespace {

/// The counter `key` in a cgroup's "key value" lines file (pids.events, memory.events, memory.oom_control).
std::uint64_t counter(const std::string& file, const std::string& key) {
  const std::string text = cgroup_files::read(file);
  for (std::size_t at = 0; at < text.size();) {  // one "key value" a line
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::size_t space = text.find(' ', at);
    if (space < end && text.compare(at, space - at, key) == 0) return std::strtoull(text.c_str() + space + 1, nullptr, 10);
    at = end + 1;
  }
  return 0;
}

/// Empty v1 cgroups of finished steps, by hierarchy, handed to the next step instead of made again: making
/// and removing a memory cgroup per step was most of what the sandbox added to a step's start (bench/README).
/// Each keeps what it was left with: the limit written into it and its event counter as its last step's end
/// read it, so the next step with the same limit writes and reads nothing at its start (four cgroup file
/// opens a step: bench/dispatch_overhead.sh with SANDBOX=on).
struct FreeCgroup {
  std::string dir;
  std::uint64_t limit = 0;                // 0: unknown, written at the start
  std::optional<std::uint64_t> counter;   // pids.events max / oom_kill at its last end; unknown: read
};
struct Recycled {
  std::mutex mu;
  std::map<std::string, std::vector<FreeCgroup>> free;  // base -> cgroups
  std::vector<std::string> bases;                        // this process's pto-runner-PID, one a hierarchy
  // The process ends: its steps' cgroups and its own go with it (an empty v1 memory cgroup left behind costs
  // the kernel memory, and every later cgroup operation walks it). What a killed process left is removed by
  // the next one (remove_stale_places).
  ~Recycled() {
    for (const auto& [base, cgroups] : free)
      for (const FreeCgroup& c : cgroups) ::rmdir(c.dir.c_str());
    for (const std::string& base : bases) ::rmdir(base.c_str());  // fails while a step's processes are in it
  }
};
Recycled& recycled() {
  static Recycled r;
  return r;
}
constexpr std::size_t kKeepPerHierarchy = 64;

/// The places of pto-runner processes that are gone (`pto-runner-PID` beside this one's, PID not running): what
/// their steps left (empty cgroups) and the place itself are removed. A cgroup a process is still in stays.
void remove_stale_places(const std::string& parent) {
  DIR* d = ::opendir(parent.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("pto-runner-", 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + 11, &end, 10);
    if (*end || pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    stale.push_back(parent + "/" + name);
  }
  ::closedir(d);
  for (const std::string& place : stale) {
    if (DIR* s = ::opendir(place.c_str())) {
      std::vector<std::string> steps;
      while (dirent* e = ::readdir(s))
        if (std::string(e->d_name).rfind("step-", 0) == 0) steps.push_back(place + "/" + e->d_name);
      ::closedir(s);
      for (const std::string& step : steps) ::rmdir(step.c_str());
    }
    ::rmdir(place.c_str());
  }
}

struct Hierarchies {
  std::string v2_root;            // our cgroup v2 tree, when its subtree has the controllers
  bool v2_pids = false, v2_memory = false, v2_cpu = false;
  std::string v1_pids, v1_memory, v1_cpu;  // this process's cgroup in each v1 hierarchy, when mounted and writable
};

/// This process's place in a v1 hierarchy of `controller`: mount point + its path there.
std::string v1_place(const std::string& controller) {
  std::string mount;
  std::ifstream mi("/proc/self/mountinfo");
  for (std::string line; std::getline(mi, line);) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 7, "cgroup ") != 0) continue;
    std::string super = line.substr(line.rfind(' ') + 1);
    std::istringstream opts(super);
    bool has = false;
    for (std::string o; std::getline(opts, o, ',');) has |= o == controller;
    if (!has) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string f;
    for (int i = 0; i < 5 && fields >> f; ++i) mount = f;
    break;
  }
  if (mount.empty()) return "";
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::istringstream names(line.substr(a + 1, b - a - 1));
    for (std::string n; std::getline(names, n, ',');)
      if (n == controller) {
        const std::string parent = mount + line.substr(b + 1);
        remove_stale_places(parent);
        std::string dir = parent + "/pto-runner-" + std::to_string(::getpid());
        if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return "";
        std::lock_guard<std::mutex> g(recycled().mu);
        recycled().bases.push_back(dir);
        return dir;
      }
  }
  return "";
}

const Hierarchies& hierarchies(const std::string& any_v2_cgroup) {
  static Hierarchies h;
  static std::once_flag once;
  std::call_once(once, [&] {
    if (!any_v2_cgroup.empty()) {
      // Our tree's root (the step cgroup's parent) may hand pids and memory to its children when its own
      // parent delegated them; it holds no process, so it may enable them for its subtree.
      const std::string root = any_v2_cgroup.substr(0, any_v2_cgroup.rfind('/'));
      const std::string have = read_cgroup_file(root + "/cgroup.controllers");
      auto has = [&](const char* c) { return (" " + have).find(std::string(" ") + c) != std::string::npos; };
      if (has("pids") && write_cgroup_file(root + "/cgroup.subtree_control", "+pids")) h.v2_pids = true;
      if (has("memory") && write_cgroup_file(root + "/cgroup.subtree_control", "+memory")) h.v2_memory = true;
      if (has("cpu") && write_cgroup_file(root + "/cgroup.subtree_control", "+cpu")) h.v2_cpu = true;
      h.v2_root = root;
    }
    if (!h.v2_pids) h.v1_pids = v1_place("pids");
    if (!h.v2_memory) h.v1_memory = v1_place("memory");
    if (!h.v2_cpu) h.v1_cpu = v1_place("cpu");
  });
  return h;
}

std::atomic<unsigned> g_next{0};

}  // namespace

std::unique_ptr<StepLimits> StepLimits::make(const Spec& spec, const std::string& v2_cgroup) {
  std::unique_ptr<StepLimits> l(new StepLimits());
  l->spec_ = spec;
  if (!spec.any()) return l;
  const Hierarchies& h = hierarchies(v2_cgroup);
  const std::string name = "step-" + std::to_string(++g_next);
  auto v1_dir = [&](const std::string& base) -> FreeCgroup {
    if (base.empty()) return {};
    {
      std::lock_guard<std::mutex> g(recycled().mu);
      auto& free = recycled().free[base];
      if (!free.empty()) {
        FreeCgroup c = free.back();
        free.pop_back();
        l->made_.push_back(c.dir);
        l->join_.push_back(c.dir);
        return c;
      }
    }
    std::string dir = base + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) return {};
    l->made_.push_back(dir);
    l->join_.push_back(dir);
    return {dir};
  };
  // A v1 limit is written unless the recycled cgroup holds it already; its counter is read unless known.
  auto set_limit = [](const FreeCgroup& c, const char* file, std::uint64_t limit) {
    return c.limit == limit || write_cgroup_file(c.dir + "/" + file, std::to_string(limit));
  };
  if (spec.pids_max) {
    FreeCgroup c;
    bool placed = false;
    if (h.v2_pids && !v2_cgroup.empty()) {
      l->pids_dir_ = v2_cgroup;
      placed = write_cgroup_file(v2_cgroup + "/pids.max", std::to_string(spec.pids_max));
    } else if (c = v1_dir(h.v1_pids); !c.dir.empty()) {
      l->pids_dir_ = c.dir;
      l->pids_v1_ = true;
      placed = set_limit(c, "pids.max", spec.pids_max);
    }
    if (!placed) {
      l->unplaced_ += "pids-max (no pids controller here) ";
      l->pids_dir_.clear();
    } else {
      l->pids_events_at_start_ = c.counter ? *c.counter : counter(l->pids_dir_ + "/pids.events", "max");
    }
  }
  if (spec.memory_max) {
    FreeCgroup c;
    if (h.v2_memory && !v2_cgroup.empty()) {
      l->memory_dir_ = v2_cgroup;
      if (!write_cgroup_file(v2_cgroup + "/memory.max", std::to_string(spec.memory_max))) l->memory_dir_.clear();
      else write_cgroup_file(v2_cgroup + "/memory.swap.max", "0");  // over the limit is over it, not swapped out
    } else if (c = v1_dir(h.v1_memory); !c.dir.empty()) {
      l->memory_dir_ = c.dir;
      l->memory_v1_ = true;
      if (!set_limit(c, "memory.limit_in_bytes", spec.memory_max)) l->memory_dir_.clear();
    }
    if (l->memory_dir_.empty()) l->unplaced_ += "memory-max (no memory controller here) ";
    else l->oom_kills_at_start_ = c.counter ? *c.counter : counter(l->memory_dir_ + (l->memory_v1_ ? "/memory.oom_control" : "/memory.events"), "oom_kill");
  }
  if (spec.cpus) {
    // cpu.max "QUOTA PERIOD": the step's CPUs' worth of time in every 100 ms, however many threads it runs.
    constexpr std::uint64_t kPeriod = 100000;
    const std::uint64_t quota = static_cast<std::uint64_t>(spec.cpus) * kPeriod;
    FreeCgroup c;
    bool placed = false;
    if (h.v2_cpu && !v2_cgroup.empty()) {
      l->cpu_dir_ = v2_cgroup;
      placed = write_cgroup_file(v2_cgroup + "/cpu.max", std::to_string(quota) + " " + std::to_string(kPeriod));
    } else if (c = v1_dir(h.v1_cpu); !c.dir.empty()) {
      l->cpu_dir_ = c.dir;
      l->cpu_v1_ = true;
      placed = c.limit == quota || (write_cgroup_file(c.dir + "/cpu.cfs_period_us", std::to_string(kPeriod)) &&
                                    write_cgroup_file(c.dir + "/cpu.cfs_quota_us", std::to_string(quota)));
    }
    if (!placed) {
      l->unplaced_ += "cpus (no cpu controller here) ";
      l->cpu_dir_.clear();
    }
  }
  while (!l->unplaced_.empty() && l->unplaced_.back() == ' ') l->unplaced_.pop_back();
  return l;
}

std::string StepLimits::exceeded() const {
  std::string why;
  if (!pids_dir_.empty()) {
    pids_events_at_end_ = counter(pids_dir_ + "/pids.events", "max");
    if (*pids_events_at_end_ > pids_events_at_start_)
      why = "it reached pids-max (" + std::to_string(spec_.pids_max) + " processes): the kernel refused it a fork";
  }
  if (!memory_dir_.empty()) {
    oom_kills_at_end_ = counter(memory_dir_ + (memory_v1_ ? "/memory.oom_control" : "/memory.events"), "oom_kill");
    if (*oom_kills_at_end_ > oom_kills_at_start_)
      why += std::string(why.empty() ? "" : "; ") +
             (spec_.memory_asked ? "it used more memory than it asked for (memory: " + format_bytes(spec_.memory_max) + ")"
                                 : "it reached memory-max (" + format_bytes(spec_.memory_max) + ")") +
             ": the OOM killer ended a process of it";
  }
  return why;
}

StepLimits::~StepLimits() {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    const std::string base = it->substr(0, it->rfind('/'));
    if (processes_gone_ || read_cgroup_file(*it + "/cgroup.procs").empty()) {  // nothing of the step is left in it: the next may have it
      // What it holds now, for the next step: its limit, and its counter when this step's end read it (and
      // nothing of the step is left to raise it since).
      FreeCgroup c{*it};
      if (pids_v1_ && *it == pids_dir_) c.limit = spec_.pids_max, c.counter = pids_events_at_end_;
      if (memory_v1_ && *it == memory_dir_) c.limit = spec_.memory_max, c.counter = oom_kills_at_end_;
      if (cpu_v1_ && *it == cpu_dir_) c.limit = static_cast<std::uint64_t>(spec_.cpus) * 100000;
      std::lock_guard<std::mutex> g(recycled().mu);
      auto& free = recycled().free[base];
      if (free.size() < kKeepPerHierarchy) {
        free.push_back(std::move(c));
        continue;
      }
    }
    cgroup_files::forget(*it);
    ::rmdir(it->c_str());
  }
}

}  // namespace pto
