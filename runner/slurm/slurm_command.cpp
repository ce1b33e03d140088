#include "slurm/slurm_command.h"

#include "config/device_spec.h"
#include "exec/spawn_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <regex>
#include <string_view>

#include <nlohmann/json.hpp>

#include "exec/child_reaper.h"
#include "util/clock.h"

extern char** environ;

namespace pto {

std::string SlurmCommandResult::why() const {
  if (!error.empty()) return error;
  std::string e = err.empty() ? out : err;
  while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
  return e.empty() ? "exit " + std::to_string(exit_code) : e;
}

SlurmCommandResult run_slurm_command(const std::vector<std::string>& argv, double timeout_seconds) {
  SlurmCommandResult r;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r.error = std::string("pipe: ") + std::strerror(errno), r;
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    return r.error = std::string("pipe: ") + std::strerror(errno), r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // none of the daemon's sockets (Asio's are not close-on-exec)
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args = exec_strings(argv);
  pid_t pid = -1;
  int rc;
  {
    std::lock_guard<std::mutex> g(owned_children::lock());  // the orphan reaper must not take its status
    rc = posix_spawnp(&pid, args[0], &fa, &at, args.data(), environ);
    if (rc == 0) owned_children::add(pid);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]), ::close(err[0]);
    r.error = "cannot run " + argv[0] + ": " + std::strerror(rc) + " (is Slurm installed and on PATH?)";
    return r;
  }
  const auto deadline = steady_now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                               std::chrono::duration<double>(timeout_seconds));
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  bool timed_out = false;
  char buf[65536];
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_now()).count();
    if (left <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left)) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  owned_children::remove(pid);
  if (timed_out) r.error = argv[0] + " did not answer within " + std::to_string(static_cast<int>(timeout_seconds)) + " s";
  else if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else r.error = argv[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
  return r;
}

bool SlurmJob::active() const {
  static const char* kActive[] = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT"};
  for (const char* s : kActive)
    if (state == s) return true;
  return false;
}

std::string SlurmJob::wait_reason() const {
  return "Slurm: " + slurm_reason() + " (job " + id + ")";
}

static constexpr std::string_view kJobNamePrefix = "pto-runner/";

std::string job_name_of(const std::string& marker) { return std::string(kJobNamePrefix) + marker; }

std::string marker_of_job(const std::string& name) {
  return name.rfind(kJobNamePrefix, 0) == 0 ? name.substr(kJobNamePrefix.size()) : "";
}

bool SlurmNode::drained() const {
  for (const auto& f : flags)
    if (f == "DRAIN") return true;
  return state == "drained" || state == "down";
}

static std::string text_of(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<long long>());
  return it->dump();
}

static std::int64_t number_of(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number()) return it->get<std::int64_t>();
  if (it->is_object() && it->contains("number")) return (*it)["number"].get<std::int64_t>();  // newer Slurm
  return 0;
}

static bool parse_squeue_json_unguarded(const std::string& text, std::vector<SlurmJob>& out, std::string& error) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("jobs") || !j["jobs"].is_array()) {
    error = "squeue --json printed no job list";
    return false;
  }
  for (const auto& x : j["jobs"]) {
    if (!x.is_object()) continue;
    SlurmJob job;
    job.id = text_of(x, "job_id");
    job.name = text_of(x, "name");
    job.comment = text_of(x, "comment");
    if (x.contains("comment") && x["comment"].is_object()) job.comment = text_of(x["comment"], "job");  // newer Slurm
    job.state = text_of(x, "job_state");
    if (x.contains("job_state") && x["job_state"].is_array() && !x["job_state"].empty())
      job.state = x["job_state"][0].get<std::string>();  // newer Slurm: a list of flags
    job.reason = text_of(x, "state_reason");
    job.node = text_of(x, "nodes");
    job.partition = text_of(x, "partition");
    job.submit_time = number_of(x, "submit_time");
    job.start_time = number_of(x, "start_time");
    if (x.contains("gres_detail") && x["gres_detail"].is_array())
      for (const auto& d : x["gres_detail"])
        if (d.is_string())
          for (int c : gres_indices(d.get<std::string>())) job.cards.push_back(c);
    out.push_back(std::move(job));
  }
  return true;
}

static bool parse_sinfo_json_unguarded(const std::string& text, const std::string& gres, std::vector<SlurmNode>& out,
                                       std::string& error) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) {
    error = "sinfo --json printed no node list";
    return false;
  }
  for (const auto& x : j["nodes"]) {
    if (!x.is_object()) continue;
    SlurmNode n;
    n.name = text_of(x, "name");
    n.state = text_of(x, "state");
    if (x.contains("state") && x["state"].is_array() && !x["state"].empty()) n.state = x["state"][0].get<std::string>();
    n.reason = text_of(x, "reason");
    n.features = text_of(x, "features");
    if (x.contains("state_flags") && x["state_flags"].is_array())
      for (const auto& f : x["state_flags"])
        if (f.is_string()) n.flags.push_back(f.get<std::string>());
    n.total = gres_counts(text_of(x, "gres"), gres);
    n.used = gres_counts(text_of(x, "gres_used"), gres);
    out.push_back(std::move(n));
  }
  return true;
}

// What a Slurm of another version prints differently (a string where a list was, a number too large) is an
// error of this poll, never an exception on the poller's thread.
bool parse_squeue_json(const std::string& text, std::vector<SlurmJob>& out, std::string& error) {
  try {
    return parse_squeue_json_unguarded(text, out, error);
  } catch (const std::exception& e) {
    error = std::string("squeue --json: unexpected content: ") + e.what();
    return false;
  }
}

bool parse_sinfo_json(const std::string& text, const std::string& gres, std::vector<SlurmNode>& out, std::string& error) {
  try {
    return parse_sinfo_json_unguarded(text, gres, out, error);
  } catch (const std::exception& e) {
    error = std::string("sinfo --json: unexpected content: ") + e.what();
    return false;
  }
}

std::vector<int> gres_indices(const std::string& detail) {
  std::vector<int> out;
  static const std::regex idx("IDX:([0-9,-]*)");
  for (std::sregex_iterator it(detail.begin(), detail.end(), idx), end; it != end; ++it) {
    std::string error;
    for (int c : parse_card_list((*it)[1], error).value_or(std::vector<int>{})) out.push_back(c);
  }
  return out;
}

std::map<std::string, int> gres_counts(const std::string& text, const std::string& name) {
  std::map<std::string, int> out;
  // Entries are separated by commas outside parentheses: "npu:g0:2(IDX:0-1),npu:g1:0(IDX:N/A)".
  int depth = 0;
  std::string cur;
  auto take = [&] {
    std::string e = cur.substr(0, cur.find('('));
    cur.clear();
    std::vector<std::string> f;
    for (std::size_t s = 0, c;; s = c + 1) {
      c = e.find(':', s);
      f.push_back(e.substr(s, c == std::string::npos ? std::string::npos : c - s));
      if (c == std::string::npos) break;
    }
    if (f.size() < 2 || f[0] != name) return;
    const std::string& count = f.back();
    if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos) return;
    out[f.size() >= 3 ? f[1] : ""] += std::stoi(count);
  };
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) take();
    else cur += c;
  }
  if (!cur.empty()) take();
  return out;
}

}  // namespace pto
