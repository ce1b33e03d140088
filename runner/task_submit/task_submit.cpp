// `task-submit` (the `pto-task-submit` binary; `pto-runner task-submit` runs it): the incumbent tool's flags, so
// pypto's test harness and model steps borrow cards through pto-runner's one queue. It leases the cards from
// the daemon, runs the command here in its own process group with TASK_DEVICE and TASKQUEUE_TASK_ID set,
// heartbeats while it runs, and exits with the command's code: 126 when the daemon refuses, 137 when the
// command is killed at --max-time or the lease is revoked, 1 when no card came within --timeout.
#include <signal.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "client/plain_http.h"
#include "util/api_paths.h"
#include "config/device_spec.h"
#include "exec/process_sweep.h"
#include "exec/spawn_process.h"
#include "slurm/srun_env.h"
#include "util/build_commit.h"
#include "util/token_file.h"
#include "task_submit/task_submit.h"

extern char** environ;

namespace pto {

namespace {

constexpr int kRefused = 126, kKilled = 137, kNoCard = 1;
volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

using Clock = std::chrono::steady_clock;

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// A program as found on PATH (commands are spawned without a PATH search).
std::string on_path(const std::string& name, const std::string& fallback) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t b = 0; b <= dirs.size();) {
    std::size_t e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    std::string candidate = (e > b ? dirs.substr(b, e - b) : std::string(".")) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    b = e + 1;
  }
  return fallback;
}
std::string bash_path() { return on_path("bash", "/bin/bash"); }

// The command in its own process group, with the lease's cards and marker in its environment and, where the
// daemon made one, inside the lease's cgroup (so a revoke's cgroup.kill reaches whatever it started, also what
// left the group and scrubbed its environment). A cgroup this user may not enter is not an error: the
// group and the marker still reach what did not escape.
// Under executor: slurm the daemon answers with an srun command line (`srun_argv`): the command then runs in a
// Slurm job on the node with the cards, through srun, whose environment loses what srun itself reads.
pid_t spawn_command(const std::string& command, const std::vector<std::string>& extra_env, const std::string& cgroup = "",
                    const std::vector<std::string>& srun_argv = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    bool replaced = false;
    for (const auto& x : extra_env) replaced |= kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!replaced && !(!srun_argv.empty() && srun_reads(kv))) env.push_back(kv);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> argv = {bash_path(), "-c", command};
  if (!srun_argv.empty()) {
    argv = srun_argv;
    argv[0] = on_path(argv[0], argv[0]);
    argv.insert(argv.end(), {"/bin/bash", "-c", command});
  }
  SpawnSpec spec{std::move(argv), std::move(env), "", -1, cgroup};
  int error = 0;
  pid_t pid = spawn_process(spec, error);
  if (pid < 0 && !cgroup.empty()) {
    spec.cgroup.clear();
    pid = spawn_process(spec, error);
  }
  return pid;
}

// SIGTERM to the group, SIGKILL after `grace`, then whatever escaped the group but carries the marker.
int stop_command(pid_t pid, const std::string& marker, double grace) {
  ::kill(-pid, SIGTERM);
  int status = 0;
  auto until = Clock::now() + std::chrono::duration<double>(grace);
  while (Clock::now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  kill_marked_processes(marker, SIGKILL);
  return status;
}

}  // namespace

int run_task_submit(int argc, char** argv) {
  CLI::App app{"task-submit: borrow NPU cards from the pto-runner daemon's queue and run a command on them "
               "(the incumbent task-submit's flags)"};
  app.set_version_flag("--version", std::string("pto-task-submit " PTO_RUNNER_VERSION " (git ") + kBuildCommit + ")");
  int exit_code = 0;
  struct Opts {
    std::string device, device_type, server, token_file, run, find, kill;
    int device_num = 0;
    double timeout = 600, max_time = 300;
    bool list = false, no_device = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = &app;
  cmd->add_option("--device", o->device, "auto, a card id, or ids A,B (default auto when --device-num is given)");
  cmd->add_option("--device-num", o->device_num, "How many cards (with --device auto)")->check(CLI::Range(1, 4096));
  cmd->add_option("--device-type", o->device_type,
                  "Only cards of this type (runner.yml devices.types; default $PTO_RUNNER_DEVICE_TYPE, which a step's "
                  "device-type sets)");
  cmd->add_flag("--no-device", o->no_device, "Run without a card (no lease)");
  cmd->add_option("--timeout", o->timeout, "Seconds to wait for the cards (0: as long as it takes)")->check(CLI::Range(0.0, 7 * 86400.0));
  cmd->add_option("--max-time", o->max_time, "Seconds the command may run; then it is killed, exit 137 (0: no limit)")
      ->check(CLI::Range(0.0, 7 * 86400.0));
  cmd->add_option("--run", o->run, "The command (bash -c); {} becomes the card ids");
  cmd->add_flag("--list", o->list, "List the daemon's active leases");
  cmd->add_option("--find", o->find, "Print the ids of active leases whose command contains this text");
  cmd->add_option("--kill", o->kill, "End a lease: kill what runs under it and free its cards");
  cmd->add_option("--server", o->server, "Daemon URL (default $PTO_RUNNER_SERVER, else http://127.0.0.1:8787)");
  cmd->add_option("--token-file", o->token_file, "Token file (default $PTO_RUNNER_LEASE_TOKEN in a step, else $PTO_RUNNER_TOKEN)");
  cmd->footer("Exit codes: the command's own; 126 the daemon refused (no such card, none can ever serve it, shutting down, "
              "unreachable); 137 killed at --max-time or the lease revoked; 1 no card within --timeout; 130/143 interrupted.");
  cmd->callback([o, &exit_code] {
    std::string server = !o->server.empty() ? o->server : std::getenv("PTO_RUNNER_SERVER") ? std::getenv("PTO_RUNNER_SERVER")
                                                                                          : "http://127.0.0.1:8787";
    while (!server.empty() && server.back() == '/') server.pop_back();
    PlainHttpClient daemon(server);
    std::string err;
    // In a step, the run's own lease token; else a token file or $PTO_RUNNER_TOKEN (an operator's).
    std::string token = !o->token_file.empty() ? read_token_file(o->token_file, err)
                        : std::getenv("PTO_RUNNER_LEASE_TOKEN") ? std::getenv("PTO_RUNNER_LEASE_TOKEN")
                        : std::getenv("PTO_RUNNER_TOKEN")       ? std::getenv("PTO_RUNNER_TOKEN")
                                                                : "";
    if (!err.empty()) {
      std::cerr << "task-submit: " << err << "\n";
      exit_code = kRefused;
      return;
    }
    if (o->list || !o->find.empty()) {
      PlainHttpResult r = daemon.request("GET", api_path::kLeases, "", "", 30);
      auto j = nlohmann::json::parse(r.body, nullptr, false);
      if (!r.reached || r.status != 200 || j.is_discarded()) {
        std::cerr << "task-submit: " << (r.reached ? "HTTP " + std::to_string(r.status) : r.error) << "\n";
        exit_code = kRefused;
        return;
      }
      for (const auto& l : j["leases"]) {
        std::string label = l.value("label", "");
        if (!o->find.empty()) {
          if (label.find(o->find) != std::string::npos) std::cout << l.value("id", "") << "\n";
          continue;
        }
        std::string cards;
        for (const auto& c : l["cards"]) cards += (cards.empty() ? "" : ",") + std::to_string(c.get<int>());
        std::printf("%-18s %-8s %-8s %s\n", l.value("id", "").c_str(), l.value("state", "").c_str(),
                    cards.empty() ? "-" : cards.c_str(), label.substr(0, 120).c_str());
      }
      exit_code = 0;
      return;
    }
    if (!o->kill.empty()) {
      PlainHttpResult r = daemon.request("DELETE", api_path::lease(o->kill) + "?reason=killed+by+task-submit+--kill", token, "", 30);
      if (!r.reached || r.status != 200) std::cerr << "task-submit: " << (r.reached ? r.body : r.error) << "\n";
      exit_code = r.reached && r.status == 200 ? 0 : 1;
      return;
    }
    if (o->run.empty()) {
      std::cerr << "task-submit: nothing to do: give --run CMD (or --list, --find, --kill)\n";
      exit_code = 2;
      return;
    }
    std::string command = o->run;
    if (o->no_device) {
      pid_t pid = spawn_command(command, {});
      int status = 0;
      ::waitpid(pid, &status, 0);
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return;
    }
    nlohmann::json body = {{"label", command.substr(0, 4096)}, {"max-seconds", o->max_time}, {"wait-seconds", o->timeout}};
    if (!o->device.empty() && o->device != "auto") {
      // task-submit's --device names cards (3, or 2,3), unlike pto-runner's --devices (a count or a range).
      std::string perr;
      auto ids = parse_card_list(o->device, perr);
      if (!ids) {
        std::cerr << "task-submit: --device " << o->device << ": " << perr << "\n";
        exit_code = kRefused;
        return;
      }
      if (o->device_num && o->device_num != static_cast<int>(ids->size())) {
        std::cerr << "task-submit: --device-num " << o->device_num << " does not match --device " << o->device << "\n";
        exit_code = kRefused;
        return;
      }
      body["device-ids"] = *ids;
    } else {
      body["devices"] = o->device_num ? o->device_num : 1;
    }
    // A step's leases are of the step's card type: pypto's a2a3 harness must not borrow an a5 card of a mixed host.
    const char* step_type = std::getenv("PTO_RUNNER_DEVICE_TYPE");
    if (std::string type = !o->device_type.empty() ? o->device_type : step_type ? step_type : ""; !type.empty())
      body["device-type"] = type;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);
    // The request waits in the queue until the cards are granted (or --timeout passes on the daemon's side).
    double wait = o->timeout > 0 ? o->timeout + 30 : 7 * 86400.0;
    PlainHttpResult r = daemon.request("POST", api_path::kLeases, token, dump(body), wait);
    auto reply = nlohmann::json::parse(r.body, nullptr, false);
    if (!r.reached || r.status != 201 || reply.is_discarded()) {
      std::string why = !r.reached ? r.error : reply.is_object() ? reply.value("error", r.body) : r.body;
      std::cerr << "task-submit: " << (r.status == 504 ? "no card: " : "refused: ") << why << "\n";
      exit_code = r.status == 504 ? kNoCard : kRefused;
      return;
    }
    const std::string id = reply.value("id", ""), marker = reply.value("marker", "");
    std::vector<int> cards = reply.contains("cards") && reply["cards"].is_array() ? reply["cards"].get<std::vector<int>>() : std::vector<int>{};
    std::vector<std::string> srun;
    if (reply.contains("srun") && reply["srun"].is_array()) srun = reply["srun"].get<std::vector<std::string>>();
    std::vector<std::string> env = {"TASKQUEUE_TASK_ID=" + id, std::string(kStepMarkVar) + "=" + marker};
    if (srun.empty()) {  // Slurm's cards are known in its job only: the wrapper there sets them and fills {}
      if (cards.empty()) {
        std::cerr << "task-submit: the daemon granted no cards\n";
        exit_code = kRefused;
        return;
      }
      const std::string ids = join_ids(cards);
      for (std::size_t p; (p = command.find("{}")) != std::string::npos;) command.replace(p, 2, ids);
      env.insert(env.end(), {"TASK_DEVICE=" + ids, "DEVICE_ID=" + std::to_string(cards.front())});
    }
    const auto granted = Clock::now();
    pid_t pid = spawn_command(command, env, reply.value("cgroup", ""), srun);
    auto release = [&](const char* why) {
      return daemon.request("DELETE", api_path::lease(id) + "?reason=" + why, token, "", 10);
    };
    if (pid < 0) {
      std::cerr << "task-submit: cannot start bash\n";
      release("could+not+start");
      exit_code = kRefused;
      return;
    }
    auto next_beat = Clock::now() + std::chrono::seconds(1);
    auto unreachable_since = Clock::time_point{};
    int status = 0;
    // Woken by the command's exit (a pidfd), a signal, or the next heartbeat or --max-time: no polling delay
    // between the command's end and the lease's release.
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    while (true) {
      if (::waitpid(pid, &status, WNOHANG) == pid) break;
      auto until = next_beat;
      const bool own_max_time = o->max_time > 0 && srun.empty();  // in Slurm, the job's wrapper counts it from the start
      if (own_max_time) until = std::min(until, granted + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o->max_time)));
      int ms = static_cast<int>(std::max<long long>(1, std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count()));
      if (pidfd >= 0) {
        pollfd pfd{pidfd, POLLIN, 0};
        ::poll(&pfd, 1, ms);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 20)));
      }
      if (::waitpid(pid, &status, WNOHANG) == pid) break;
      if (g_signal) {
        stop_command(pid, marker, 3);
        release("client+interrupted");
        exit_code = g_signal == SIGINT ? 130 : 143;
        return;
      }
      if (own_max_time && Clock::now() - granted > std::chrono::duration<double>(o->max_time)) {
        std::cerr << "[task-submit] " << id << " killed after --max-time " << o->max_time << " s\n";
        stop_command(pid, marker, 3);
        release("max-time");
        exit_code = kKilled;
        return;
      }
      if (Clock::now() >= next_beat) {
        next_beat = Clock::now() + std::chrono::seconds(1);
        PlainHttpResult hb = daemon.request("POST", api_path::lease_heartbeat(id), token, "{}", 5);
        if (hb.reached && hb.status == 410) {
          auto j = nlohmann::json::parse(hb.body, nullptr, false);
          std::cerr << "[task-submit] " << id << ": " << (j.is_object() ? j.value("error", hb.body) : hb.body) << "\n";
          stop_command(pid, marker, 3);
          exit_code = kKilled;
          return;
        }
        // A daemon gone for longer than it would wait for us has freed the cards (its flocks died with it).
        if (!hb.reached) {
          if (unreachable_since == Clock::time_point{}) unreachable_since = Clock::now();
          if (Clock::now() - unreachable_since > std::chrono::seconds(10)) {
            std::cerr << "[task-submit] lost the daemon (" << hb.error << "); stopping the command\n";
            stop_command(pid, marker, 3);
            exit_code = kKilled;
            return;
          }
        } else {
          unreachable_since = {};
        }
      }
    }
    if (pidfd >= 0) ::close(pidfd);
    ::kill(-pid, SIGKILL);  // what the command left in its group does not outlive the lease
    PlainHttpResult released = release("released+by+its+client");
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    // Killed because the lease was revoked (--kill, its run ended) before the next heartbeat said so: the
    // daemon no longer knows the lease. That is task-submit's "killed" (137), not the command's own end.
    if (WIFSIGNALED(status) && released.reached && released.status == 410) {
      std::cerr << "[task-submit] " << id << " was revoked; its command was killed\n";
      exit_code = kKilled;
    }
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}

}  // namespace pto
