#include "doctor/doctor.h"


#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <algorithm>

#include "config/device_spec.h"
#include "exec/cgroup_tree.h"
#include "exec/run_sync.h"
#include "plan/plan.h"
#include "sandbox/run_tree.h"
#include "sched/card_lock.h"
#include "toolchain/toolchain_setup.h"
#include "util/process_env.h"

namespace fs = std::filesystem;

namespace pto {

std::string to_string(CheckStatus s) {
  switch (s) {
    case CheckStatus::Ok: return "ok";
    case CheckStatus::Warn: return "warn";
    case CheckStatus::Fail: return "FAIL";
  }
  return "?";
}

int DoctorReport::exit_code() const {
  int code = 0;
  for (const auto& c : checks) code = std::max(code, c.status == CheckStatus::Fail ? 2 : c.status == CheckStatus::Warn ? 1 : 0);
  return code;
}

namespace {

std::string group_name(gid_t gid) {
  if (const group* g = ::getgrgid(gid)) return g->gr_name;
  return std::to_string(gid);
}


CheckResult check_cards(const RunnerConfig& rc) {
  CheckResult r{"cards"};
  std::vector<std::string> missing, world;
  std::set<std::string> groups;
  int present = 0;
  auto look = [&](const std::string& f) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) return missing.push_back(f);
    ++present;
    groups.insert(group_name(st.st_gid));
    if (st.st_mode & (S_IROTH | S_IWOTH)) world.push_back(f);
  };
  for (int id : rc.device_ids)
    for (const auto& f : rc.files_of_card(id)) look(f);
  for (const auto& f : rc.shared_files) look(f);
  std::string group_list;
  for (const auto& g : groups) group_list += (group_list.empty() ? "" : ", ") + g;
  if (!missing.empty()) {
    r.status = CheckStatus::Fail;
    r.detail = std::to_string(missing.size()) + " card file(s) missing, first " + missing.front() + " (devices.card-files " +
               (rc.card_files.empty() ? "" : rc.card_files.front()) + ", shared-files)";
    r.fix = "install the NPU driver, or set devices.card-files / shared-files in runner.yml to where this host's files are";
    return r;
  }
  r.detail = std::to_string(present) + " files of cards " + join_ids(rc.device_ids) + " and the shared files present (group " + group_list + ")";
  if (!world.empty()) {
    r.status = CheckStatus::Warn;
    r.detail += "; " + world.front() + " is open to every user";
    r.fix = "chmod o-rw the card files: a step may open only its own cards' files (pto-runner gives a run's sandbox user an "
            "ACL entry on its cards' files while it holds them)";
  } else if (rc.sandbox.enabled) {
    for (const auto& g : groups)
      if (std::find(rc.sandbox.groups.begin(), rc.sandbox.groups.end(), g) != rc.sandbox.groups.end()) {
        r.status = CheckStatus::Warn;
        r.detail += "; sandbox.groups has " + g + ", the cards' group: every run's steps could open every card";
        r.fix = "remove " + g + " from sandbox.groups in runner.yml (each run is given its own cards' files by ACL)";
        break;
      }
  }
  return r;
}

CheckResult check_lock_dir(const RunnerConfig& rc) {
  CheckResult r{"locks"};
  struct stat st {};
  if (::lstat(rc.lock_dir.c_str(), &st) != 0) {
    r.status = CheckStatus::Warn;
    r.detail = rc.lock_dir + " does not exist yet (serve makes it, root's, 0755)";
    r.fix = "nothing to do, or make it now: install -d -m 0755 -o root -g root " + rc.lock_dir;
    return r;
  }
  if (!S_ISDIR(st.st_mode)) {
    r.status = CheckStatus::Fail;
    r.detail = rc.lock_dir + " is not a directory" + (S_ISLNK(st.st_mode) ? " (a symbolic link)" : "");
    r.fix = "remove it and let serve make the lock dir, or set devices.lock-dir";
    return r;
  }
  if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    r.status = CheckStatus::Fail;
    r.detail = rc.lock_dir + " is owned by uid " + std::to_string(st.st_uid) + " with mode " +
               [&] { char m[8]; std::snprintf(m, sizeof m, "%04o", st.st_mode & 07777); return std::string(m); }() +
               ": another user could plant or hold the cards' lock files";
    r.fix = "chown root:root " + rc.lock_dir + " && chmod 0755 " + rc.lock_dir;
    return r;
  }
  // The incumbent's lock files here under another name than ours would let both hand out one card.
  std::error_code ec;
  int incumbent_files = 0;
  static const std::regex incumbent_re("npu_device_[0-9]+\\.lock");
  for (const auto& e : fs::directory_iterator(rc.lock_dir, ec))
    incumbent_files += std::regex_match(e.path().filename().string(), incumbent_re);
  r.detail = rc.lock_dir + ": root's, 0755; lock-name " + rc.lock_name;
  if (incumbent_files && rc.lock_name != "npu_device_{id}.lock") {
    r.status = CheckStatus::Fail;
    r.detail += "; but the incumbent's npu_device_N.lock files are here (" + std::to_string(incumbent_files) + ")";
    r.fix = "set devices.lock-name: npu_device_{id}.lock in runner.yml, so pto-runner and the incumbent never share a card";
  }
  return r;
}

CheckResult check_incumbent(const RunnerConfig& rc) {
  CheckResult r{"incumbent"};
  const std::string ts = find_on_path("task-submit");
  const std::string ours = (fs::path(self_executable()).parent_path() / "pto-task-submit").string();
  std::error_code ec;
  const bool is_ours = !ts.empty() && fs::canonical(ts, ec) == fs::canonical(ours, ec);
  int held = 0;
  for (int id : rc.device_ids) {
    std::string holder;
    held += CardLock::held_elsewhere(rc.lock_dir, id, holder, rc.lock_name);
  }
  if (ts.empty() || is_ours) {
    r.detail = ts.empty() ? "no other task-submit on PATH" : "task-submit on PATH is pto-runner's (" + ts + ")";
  } else {
    r.status = rc.lock_name == "npu_device_{id}.lock" ? CheckStatus::Ok : CheckStatus::Warn;
    r.detail = "the incumbent task-submit is installed (" + ts + "); steps get pto-runner's first on their PATH";
    if (r.status == CheckStatus::Warn) r.fix = "set devices.lock-name: npu_device_{id}.lock so both tools see each other's cards";
  }
  if (held) r.detail += "; " + std::to_string(held) + " card lock(s) held by another program now";
  return r;
}

CheckResult check_cgroup(const RunnerConfig& rc) {
  CheckResult r{"cgroup"};
  if (rc.containment == Containment::Sweep) {
    r.status = CheckStatus::Warn;
    r.detail = "containment: sweep (runner.yml): a step that leaves its process group and scrubs its environment escapes";
    r.fix = "remove containment: sweep where the host delegates cgroup v2";
    return r;
  }
  CgroupTree& t = CgroupTree::instance();
  if (!t.available()) {
    r.status = CheckStatus::Fail;
    r.detail = "no delegated cgroup v2 with cgroup.kill: " + t.why_not();
    r.fix = "run the daemon under systemd with Delegate=yes (the shipped unit does), on a kernel with cgroup v2 (5.14+)";
    return r;
  }
  r.detail = "cgroup v2 delegated at " + t.root() + " (each step in its own cgroup, cgroup.kill)";
  return r;
}

CheckResult check_sandbox(const RunnerConfig& rc) {
  CheckResult r{"sandbox"};
  if (!rc.sandbox.enabled) {
    r.status = CheckStatus::Warn;
    r.detail = "sandbox: off: steps run as the daemon's own user";
    r.fix = "remove sandbox: off and run `pto-runner sandbox setup` (pull requests' code must not run as the daemon)";
    return r;
  }
  std::vector<std::string> missing;
  for (int i = 0; i < rc.sandbox.count; ++i)
    if (!::getpwnam(rc.sandbox.user(i).c_str())) missing.push_back(rc.sandbox.user(i));
  if (!missing.empty()) {
    r.status = CheckStatus::Fail;
    r.detail = std::to_string(missing.size()) + " of " + std::to_string(rc.sandbox.count) + " sandbox users missing (first " + missing.front() + ")";
    r.fix = "pto-runner sandbox setup (makes " + rc.sandbox.user(0) + " .. " + rc.sandbox.user(rc.sandbox.count - 1) + ")";
    return r;
  }
  r.detail = rc.sandbox.user(0) + " .. " + rc.sandbox.user(rc.sandbox.count - 1) + " exist";
  if (std::string dir = unsearchable_ancestor(rc.state_dir); !dir.empty()) {
    r.status = CheckStatus::Fail;
    r.detail += "; but they cannot reach the state dir " + rc.state_dir + " (" + dir + " is not searchable by others)";
    r.fix = "chmod o+x " + dir + " (serve refuses to start otherwise), or set state-dir elsewhere";
  }
  return r;
}

/// The caches' tiers owned as caches/cache_tiers makes them: a protected tier another user could write is a
/// cache poisoning waiting to happen (pypto's shared ccache dir with umask 000 was one).
CheckResult check_caches(const RunnerConfig& rc) {
  CheckResult r{"caches"};
  const std::string dir = rc.caches.dir.empty() ? rc.state_dir + "/caches" : rc.caches.dir;
  const struct group* g = ::getgrnam(rc.caches.group.c_str());
  if (rc.sandbox.enabled && !g) {
    r.status = CheckStatus::Fail;
    r.detail = "the group " + rc.caches.group + " (caches.group) does not exist: protected runs cannot write the protected tier";
    r.fix = "pto-runner sandbox setup (makes it)";
    return r;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    r.detail = dir + " is made at the first run with caches";
    return r;
  }
  std::vector<std::string> wrong;
  auto check = [&](const fs::path& p, bool protected_tier) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return;
    if (S_ISLNK(st.st_mode)) wrong.push_back(p.string() + " is a symbolic link");
    else if (st.st_uid != 0) wrong.push_back(p.string() + " is owned by uid " + std::to_string(st.st_uid) + ", not root");
    else if (st.st_mode & S_IWOTH) wrong.push_back(p.string() + " is writable by others");
    else if (protected_tier && rc.sandbox.enabled && g && st.st_gid != g->gr_gid)
      wrong.push_back(p.string() + " is not of group " + rc.caches.group);
  };
  check(dir, false);
  for (fs::directory_iterator c(dir, ec), end; !ec && c != end; c.increment(ec)) {
    check(c->path(), false);
    check(c->path() / "protected", true);
    check(c->path() / "scopes", false);
  }
  if (!wrong.empty()) {
    r.status = CheckStatus::Fail;
    r.detail = wrong.front() + (wrong.size() > 1 ? " (and " + std::to_string(wrong.size() - 1) + " more)" : "");
    r.fix = "remove " + dir + " (the next runs make it again, cold) or give it back to root: chown root; chmod o-w";
    return r;
  }
  r.detail = dir + ": owned as it should be";
  return r;
}

CheckResult check_token(const RunnerConfig& rc, const std::string& root, const DoctorOptions& opts) {
  CheckResult r{"token"};
  std::string path = resolve_under_root(root, !opts.token_file.empty() ? opts.token_file : rc.token_file);
  if (path.empty()) path = rc.state_dir + "/token";
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    r.detail = path + " does not exist yet (serve makes it, 0600)";
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.status = CheckStatus::Fail;
    r.detail = path + " is not a regular file";
    r.fix = "point token-file at a file holding the token";
    return r;
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    r.status = CheckStatus::Fail;
    r.detail = path + " can be read by other users (mode " + [&] { char m[8]; std::snprintf(m, sizeof m, "%04o", st.st_mode & 07777); return std::string(m); }() + ")";
    r.fix = "chmod 0600 " + path + " (and rotate the token: anyone could have read it)";
    return r;
  }
  r.detail = path + ": readable by its owner only";
  if (st.st_uid != 0 && ::geteuid() == 0) {
    r.status = CheckStatus::Warn;
    r.detail += ", but owned by uid " + std::to_string(st.st_uid);
    r.fix = "chown root " + path;
  }
  return r;
}

/// Each notify receiver's secret file: there, a regular file, not empty, readable by root alone (anyone who
/// reads a Feishu bot's secret can post as pto-runner).
std::vector<CheckResult> check_notify(const RunnerConfig& rc, const std::string& root) {
  std::vector<CheckResult> out;
  for (const NotifyReceiver& n : rc.notify.receivers) {
    CheckResult r{"notify " + n.name};
    if (n.secret_file.empty()) {
      r.detail = to_string(n.kind) + " receiver, no secret-file";
      out.push_back(r);
      continue;
    }
    const std::string path = resolve_under_root(root, n.secret_file);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      r.status = CheckStatus::Fail;
      r.detail = "its secret-file " + path + (::lstat(path.c_str(), &st) != 0 ? " does not exist" : " is not a regular file");
      r.fix = "write the secret (Feishu: the bot's signing secret) into " + path + ", mode 0600";
    } else if (st.st_size == 0) {
      r.status = CheckStatus::Fail;
      r.detail = "its secret-file " + path + " is empty";
      r.fix = "write the secret into " + path;
    } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
      r.status = CheckStatus::Fail;
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
      r.detail = "its secret-file " + path + " can be read by other users (mode " + mode + ")";
      r.fix = "chmod 0600 " + path + " (and rotate the secret: anyone could have read it)";
    } else {
      r.detail = to_string(n.kind) + " receiver; " + path + ": readable by its owner only";
      if (st.st_uid != 0 && ::geteuid() == 0) {
        r.status = CheckStatus::Warn;
        r.detail += ", but owned by uid " + std::to_string(st.st_uid);
        r.fix = "chown root " + path;
      }
    }
    out.push_back(r);
  }
  return out;
}

CheckResult check_python(const Project& p) {
  CheckResult r{"python"};
  if (p.toolchain.kind != ArchiveKind::Whl) {
    r.detail = "the pin is not a wheel: no interpreter needed";
    return r;
  }
  const std::string artifact = p.toolchain.artifact_name(p.versions.ptoas_version, host_arch());
  const auto want = wheel_cpython_versions(artifact);
  SyncResult v = run_sync({p.toolchain.python, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"}, environment_list(), 10, "/dev/null");
  const std::string have = v.output.substr(0, v.output.find('\n'));
  std::string wanted;
  for (const auto& w : want) wanted += (wanted.empty() ? "" : " or ") + w;
  if (!v.outcome.ok() || have.empty()) {
    r.status = CheckStatus::Fail;
    r.detail = "'" + p.toolchain.python + "' (toolchain/ptoas.yml python:) cannot run, or has no venv module";
    r.fix = "install Python " + (wanted.empty() ? std::string("3") : wanted) + " with its venv module, or name an interpreter in toolchain/ptoas.yml python:";
    return r;
  }
  if (!want.empty() && std::find(want.begin(), want.end(), have) == want.end()) {
    r.status = CheckStatus::Fail;
    r.detail = "'" + p.toolchain.python + "' is Python " + have + "; " + artifact + " needs CPython " + wanted;
    r.fix = "install Python " + wanted + ", or name it in toolchain/ptoas.yml python:";
    return r;
  }
  r.detail = "'" + p.toolchain.python + "' is Python " + have + (want.empty() ? "" : ", as " + artifact + " needs");
  return r;
}

CheckResult check_npu_smi() {
  CheckResult r{"npu-smi"};
  if (std::string p = find_on_path("npu-smi"); !p.empty()) {
    r.detail = p;
    return r;
  }
  r.status = CheckStatus::Warn;
  r.detail = "npu-smi is not on PATH (pypto's setup runs `npu-smi info`)";
  r.fix = "install the Ascend driver's tools, or put npu-smi's directory on PATH in runner.yml env";
  return r;
}

/// The variables the definitions expect the host to provide: `${NAME:?...}` checks a step makes before it
/// could have set anything itself (as pypto's build job checks CI_CACHE_ROOT and CANN_ROOT first; a check after
/// an `eval`, `source` or `export` line is of what the step just set), and names they `unset` (the host sets
/// them: pypto's PTO2_RING_*).
std::pair<std::set<std::string>, std::set<std::string>> host_variables(const Project& p) {
  std::set<std::string> required, expected;
  static const std::regex required_re(R"(\$\{([A-Za-z_][A-Za-z0-9_]*):\?)");
  static const std::regex sets_re(R"(^\s*(eval|source|\.|export)\s)");
  static const std::regex unset_re(R"((^|[\n;&|]\s*)unset\s+((?:[A-Za-z_][A-Za-z0-9_]*[ \t]*)+))");
  auto scan = [&](const std::string& text) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (std::regex_search(line, sets_re)) break;
      for (std::sregex_iterator m(line.begin(), line.end(), required_re), e; m != e; ++m) required.insert((*m)[1]);
    }
    for (std::sregex_iterator m(text.begin(), text.end(), unset_re), e; m != e; ++m) {
      std::istringstream names((*m)[2].str());
      for (std::string n; names >> n;) expected.insert(n);
    }
  };
  for (const auto& j : p.jobs)
    for (const auto& s : j.steps) scan(s.run);
  for (const auto& [id, m] : p.models) scan(m.command);
  return {required, expected};
}

CheckResult check_env(const Project& p) {
  CheckResult r{"env"};
  const RunnerConfig& rc = p.runner;
  auto [required, expected] = host_variables(p);
  std::vector<std::string> missing, absent;
  for (const auto& n : required)
    if (!rc.env.count(n)) missing.push_back(n);
  for (const auto& n : expected)
    if (!rc.env.count(n) && !required.count(n)) absent.push_back(n);
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  const std::string where = rc.env_file.empty() ? "runner.yml env (no env-file)" : "runner.yml env and env-file " + rc.env_file;
  if (!missing.empty()) {
    r.status = CheckStatus::Fail;
    r.detail = "the definitions require " + list(missing) + ", not set in " + where;
    r.fix = "add them to env-file (the runner's .env) or runner.yml env";
    return r;
  }
  if (!absent.empty()) {
    r.status = CheckStatus::Warn;
    r.detail = "the definitions unset " + list(absent) + ", which " + where + " does not set";
    r.fix = "set them in env-file if this host's steps need them (pypto's runner .env does)";
    return r;
  }
  r.detail = required.empty() && expected.empty() ? "the definitions require nothing of the host's environment"
                                                  : "every variable the definitions require is set in " + where;
  return r;
}

CheckResult check_state_dir(const RunnerConfig& rc) {
  CheckResult r{"state dir"};
  std::error_code ec;
  fs::path probe = fs::exists(rc.state_dir, ec) ? fs::path(rc.state_dir) : fs::path(rc.state_dir).parent_path();
  if (::access(probe.c_str(), W_OK) != 0) {
    r.status = CheckStatus::Fail;
    r.detail = rc.state_dir + " cannot be written";
    r.fix = "make it writable for the daemon, or set state-dir";
    return r;
  }
  auto space = fs::space(probe, ec);
  r.detail = rc.state_dir + (ec ? "" : ": " + std::to_string(space.available >> 30) + " GiB free");
  if (!ec && space.available < (1ull << 30)) {
    r.status = CheckStatus::Warn;
    r.fix = "free space: step logs and worktrees live here";
  }
  return r;
}

}  // namespace

DoctorReport run_doctor(const Project& project, const DoctorOptions& opts) {
  const RunnerConfig& rc = project.runner;
  DoctorReport out;
  out.checks.push_back(check_cards(rc));
  out.checks.push_back(check_lock_dir(rc));
  out.checks.push_back(check_incumbent(rc));
  out.checks.push_back(check_cgroup(rc));
  out.checks.push_back(check_sandbox(rc));
  out.checks.push_back(check_caches(rc));
  out.checks.push_back(check_token(rc, project.root, opts));
  out.checks.push_back(check_python(project));
  out.checks.push_back(check_npu_smi());
  out.checks.push_back(check_env(project));
  out.checks.push_back(check_state_dir(rc));
  for (CheckResult& r : check_notify(rc, project.root)) out.checks.push_back(std::move(r));
  return out;
}

}  // namespace pto
