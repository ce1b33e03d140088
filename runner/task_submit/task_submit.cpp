// `task-submit` (the `pto-task-submit` binary; `pto-runner task-submit` runs it): the incumbent tool's flags, so
// pypto's test harness and model steps borrow cards through pto-runner's one queue. It leases the cards from
// the daemon, runs the command here in its own process group with TASK_DEVICE and TASKQUEUE_TASK_ID set
// (task_submit/leased_command), heartbeats while it runs, and exits with the command's code: 126 when the
// daemon refuses, 137 when the command is killed at --max-time or the lease is revoked, 1 when no card came
// within --timeout.
#include <poll.h>
#include <signal.h>
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
#include "config/device_spec.h"
#include "exec/process_sweep.h"
#include "lease/lease_wire.h"
#include "task_submit/leased_command.h"
#include "task_submit/output_tap.h"
#include "task_submit/task_submit.h"
#include "util/api_paths.h"
#include "util/build_commit.h"
#include "util/token_file.h"
#include "util/clock.h"

namespace pto {

namespace {

namespace w = lease_wire;
using Clock = std::chrono::steady_clock;
constexpr int kRefused = 126, kKilled = 137, kNoCard = 1;
constexpr int kWrongListener = 3;  // another user's listener has the daemon's address: nothing was sent to it
volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

struct Options {
  std::string device, device_type, server, token_file, run, find, kill;
  int device_num = 0;
  double timeout = 600, max_time = 300;
  bool list = false, no_device = false;
};

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

/// --list and --find: the daemon's active leases.
int list_leases(PlainHttpClient& daemon, const Options& o) {
  PlainHttpResult r = daemon.request("GET", api_path::kLeases, "", "", 30);
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (!r.reached || r.status != 200 || j.is_discarded()) {
    std::cerr << "task-submit: " << (r.reached ? "HTTP " + std::to_string(r.status) : r.error) << "\n";
    return r.wrong_listener ? kWrongListener : kRefused;
  }
  for (const auto& l : j.value(w::kLeases, nlohmann::json::array())) {
    if (!l.is_object()) continue;
    std::string label = l.value(w::kLabel, "");
    if (!o.find.empty()) {
      if (label.find(o.find) != std::string::npos) std::cout << l.value(w::kId, "") << "\n";
      continue;
    }
    const nlohmann::json held = l.value(w::kCards, nlohmann::json::array());
    std::vector<int> ids;
    for (const auto& c : held)
      if (c.is_number_integer()) ids.push_back(c.get<int>());
    std::string cards = join_ids(ids);
    std::printf("%-18s %-8s %-8s %s\n", l.value(w::kId, "").c_str(), l.value(w::kState, "").c_str(),
                cards.empty() ? "-" : cards.c_str(), label.substr(0, 120).c_str());
  }
  return 0;
}

/// --kill: ends a lease; the daemon kills what runs under it.
int kill_lease(PlainHttpClient& daemon, const std::string& token, const std::string& id) {
  PlainHttpResult r = daemon.request("DELETE", api_path::lease(id) + "?reason=killed+by+task-submit+--kill", token, "", 30);
  if (!r.reached || r.status != 200) std::cerr << "task-submit: " << (r.reached ? r.body : r.error) << "\n";
  return r.wrong_listener ? kWrongListener : r.reached && r.status == 200 ? 0 : 1;
}

/// The lease request's body from the flags; "" and an error line when the flags do not make one.
/// `waiting_since` (epoch seconds): asked again, first asked then (its place in line is kept).
std::string lease_body(const Options& o, std::string& error, double waiting_since = 0) {
  nlohmann::json body = {{w::kLabel, o.run.substr(0, 4096)}, {w::kMaxSeconds, o.max_time}, {w::kWaitSeconds, o.timeout}};
  if (waiting_since > 0) body[w::kWaitingSince] = waiting_since;
  if (!o.device.empty() && o.device != "auto") {
    // task-submit's --device names cards (3, or 2,3), unlike pto-runner's --devices (a count or a range).
    auto ids = parse_card_list(o.device, error);
    if (!ids) {
      error = "--device " + o.device + ": " + error;
      return "";
    }
    if (o.device_num && o.device_num != static_cast<int>(ids->size())) {
      error = "--device-num " + std::to_string(o.device_num) + " does not match --device " + o.device;
      return "";
    }
    body[w::kDeviceIds] = *ids;
  } else {
    body[w::kDevices] = o.device_num ? o.device_num : 1;
  }
  // Taken from inside a test: pytest sets PYTEST_CURRENT_TEST ("NODEID (call)") for every process a test starts.
  if (const char* current = std::getenv("PYTEST_CURRENT_TEST"); current && *current) {
    std::string test = current;
    if (auto sp = test.rfind(" ("); sp != std::string::npos && test.back() == ')') test.erase(sp);
    body[w::kTest] = test.substr(0, 4096);
  }
  // A step's leases are of the step's card type: pypto's a2a3 harness must not borrow an a5 card of a mixed host.
  const char* step_type = std::getenv("PTO_RUNNER_DEVICE_TYPE");
  if (std::string type = !o.device_type.empty() ? o.device_type : step_type ? step_type : ""; !type.empty())
    body[w::kDeviceType] = type;
  return dump(body);
}

/// What the daemon granted.
struct Grant {
  std::string id, marker, cgroup;
  std::vector<int> cards;
  std::vector<std::string> srun;  // executor: slurm
};

/// How long a granted lease's client waits for an unreachable daemon before it stops its command.
constexpr int kLostDaemonSeconds = 60;

/// Runs the granted command to its end and releases the lease: woken by the command's exit (a pidfd), a
/// signal, or the next heartbeat or --max-time, so no polling delay lies between the command's end and the
/// release. Returns task-submit's exit code.
int supervise(PlainHttpClient& daemon, const std::string& token, const Options& o, const Grant& g, pid_t pid, OutputTap* tap) {
  const std::string& id = g.id;
  // The daemon answers once every process of the command is gone and the cards are free (it kills what is left:
  // up to its kill grace, then 5 s after SIGKILL); exiting only after that, nothing of the command outlives us.
  auto release = [&](const char* why) { return daemon.request("DELETE", api_path::lease(id) + "?reason=" + why, token, "", 120); };
  const auto granted = steady_now();
  const bool own_max_time = o.max_time > 0 && g.srun.empty();  // in Slurm, the job's wrapper counts it from the start
  const auto max_until = granted + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.max_time));
  auto next_beat = steady_now() + std::chrono::seconds(1);
  auto unreachable_since = Clock::time_point{};
  int status = 0;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  while (true) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    auto until = own_max_time ? std::min(next_beat, max_until) : next_beat;
    int ms = static_cast<int>(std::max<long long>(1, std::chrono::duration_cast<std::chrono::milliseconds>(until - steady_now()).count()));
    std::vector<pollfd> fds;
    if (pidfd >= 0) fds.push_back({pidfd, POLLIN, 0});
    if (tap) tap->add_polls(fds);
    if (!fds.empty()) ::poll(fds.data(), fds.size(), pidfd >= 0 ? ms : std::min(ms, 20));
    else std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 20)));
    if (tap) tap->on_ready(fds);
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (g_signal) {
      stop_command(pid, g.marker, 3);
      release("client+interrupted");
      return g_signal == SIGINT ? 130 : 143;
    }
    if (own_max_time && steady_now() >= max_until) {
      std::cerr << "[task-submit] " << id << " killed after --max-time " << o.max_time << " s\n";
      stop_command(pid, g.marker, 3);
      release("max-time");
      return kKilled;
    }
    if (steady_now() < next_beat) continue;
    next_beat = steady_now() + std::chrono::seconds(1);
    PlainHttpResult hb = daemon.request("POST", api_path::lease_heartbeat(id), token, "{}", 5);
    if (hb.reached && hb.status == 410) {
      auto j = nlohmann::json::parse(hb.body, nullptr, false);
      std::cerr << "[task-submit] " << id << ": " << (j.is_object() ? j.value(w::kError, hb.body) : hb.body) << "\n";
      stop_command(pid, g.marker, 3);
      return kKilled;
    }
    // A daemon restarting comes back within seconds and knows the lease again (its cards were kept by the
    // step supervisor meanwhile); one gone for longer than kLostDaemonSeconds is not coming back for it.
    if (hb.reached) {
      unreachable_since = {};
    } else {
      if (unreachable_since == Clock::time_point{}) unreachable_since = steady_now();
      if (steady_now() - unreachable_since > std::chrono::seconds(kLostDaemonSeconds)) {
        std::cerr << "[task-submit] lost the daemon (" << hb.error << "); stopping the command\n";
        stop_command(pid, g.marker, 3);
        return kKilled;
      }
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  ::kill(-pid, SIGKILL);  // what the command left in its group does not outlive the lease
  // How the command ended, with its output's evidence (harness markers, the last lines): the daemon charges
  // the lease's cards when the failure is theirs (SPEC "Every red is true": leases too).
  nlohmann::json report = {{w::kExitCode, WIFEXITED(status) ? WEXITSTATUS(status) : -1}, {w::kSignal, WIFSIGNALED(status) ? WTERMSIG(status) : 0}};
  if (tap) {
    tap->drain(500);
    report[w::kOutput] = tap->evidence();
  }
  const std::string body = report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  PlainHttpResult released = daemon.request("DELETE", api_path::lease(id) + "?reason=released+by+its+client", token, body, 120);
  // A daemon restarting right now: the release is said again once it is back (else its heartbeat clock
  // frees the cards a few seconds after it is).
  for (const auto lost = steady_now(); !released.reached && steady_now() - lost < std::chrono::seconds(kLostDaemonSeconds);) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    released = daemon.request("DELETE", api_path::lease(id) + "?reason=released+by+its+client", token, body, 120);
  }
  // Killed because the lease was revoked (--kill, its run ended) before the next heartbeat said so: the
  // daemon no longer knows the lease. That is task-submit's "killed" (137), not the command's own end.
  if (WIFSIGNALED(status) && released.reached && released.status == 410) {
    std::cerr << "[task-submit] " << id << " was revoked; its command was killed\n";
    return kKilled;
  }
  return exit_code_of(status);
}

/// --run with cards: lease, run, release.
int run_leased(PlainHttpClient& daemon, const std::string& token, const Options& o) {
  std::string error;
  const std::string body = lease_body(o, error);
  if (body.empty()) {
    std::cerr << "task-submit: " << error << "\n";
    return kRefused;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  // The request waits in the queue until the cards are granted (or --timeout passes on the daemon's side).
  double wait = o.timeout > 0 ? o.timeout + 30 : 7 * 86400.0;
  const auto asked = steady_now();
  const double asked_epoch = std::chrono::duration<double>(wall_now().time_since_epoch()).count();
  PlainHttpResult r = daemon.request("POST", api_path::kLeases, token, body, wait);
  // No answer: the daemon went away (a crash, a restart, an upgrade) while this waited, or is away now. Its
  // address stays bound meanwhile (its socket unit or its steps' supervisor holds it), so asking again waits
  // for the next daemon, which queues the request anew: for as long as --timeout allows (without one, while
  // the daemon is away no longer than kLostDaemonSeconds at a stretch). 126 only for a real refusal.
  // Each new try is sent only once a daemon has taken its connection up (never into a listener kept while none
  // runs), so the time away is counted here; one that was taken up and dropped again had a live daemon.
  auto away_since = steady_now();
  daemon.require_accepted(5);
  while (!r.reached && !r.wrong_listener && !g_signal) {
    const auto now = steady_now();
    if (r.sent) away_since = now;
    const double waited = std::chrono::duration<double>(now - asked).count();
    if (o.timeout > 0 ? waited >= o.timeout : now - away_since > std::chrono::seconds(kLostDaemonSeconds)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    Options left = o;
    if (o.timeout > 0) left.timeout = std::max(0.001, o.timeout - waited);
    r = daemon.request("POST", api_path::kLeases, token, lease_body(left, error, asked_epoch), o.timeout > 0 ? left.timeout + 30 : wait);
  }
  auto reply = nlohmann::json::parse(r.body, nullptr, false);
  if (!r.reached || r.status != 201 || !reply.is_object()) {
    // No card in time: nothing on either stream, exit 1, as the incumbent does (pypto's harness reads empty
    // output with exit 1 as "no card within --timeout", anything else as a failure of the child).
    if (r.status == 504) return kNoCard;
    if (r.wrong_listener) {
      std::cerr << "task-submit: " << r.error << "\n";
      return kWrongListener;
    }
    std::string why = !r.reached ? r.error : reply.is_object() ? reply.value(w::kError, r.body) : r.body;
    std::cerr << "task-submit: refused: " << why << "\n";
    return kRefused;
  }
  Grant g;
  g.id = reply.value(w::kId, "");
  g.marker = reply.value(w::kMarker, "");
  g.cgroup = reply.value(w::kCgroup, "");
  if (reply.contains(w::kCards) && reply[w::kCards].is_array()) g.cards = reply[w::kCards].get<std::vector<int>>();
  if (reply.contains(w::kSrun) && reply[w::kSrun].is_array()) g.srun = reply[w::kSrun].get<std::vector<std::string>>();
  std::string command = o.run;
  std::vector<std::string> env = {"TASKQUEUE_TASK_ID=" + g.id, std::string(kStepMarkVar) + "=" + g.marker};
  if (g.srun.empty()) {  // Slurm's cards are known in its job only: the wrapper there sets them and fills {}
    if (g.cards.empty()) {
      std::cerr << "task-submit: the daemon granted no cards\n";
      return kRefused;
    }
    const std::string ids = join_ids(g.cards);
    for (std::size_t p; (p = command.find("{}")) != std::string::npos;) command.replace(p, 2, ids);
    env.insert(env.end(), {"TASK_DEVICE=" + ids, "DEVICE_ID=" + std::to_string(g.cards.front())});
  }
  // Its output passes through us now: a reader that went away must not kill task-submit with SIGPIPE (the
  // lease would then go unreleased until its heartbeat timed out); the command gets default dispositions.
  ::signal(SIGPIPE, SIG_IGN);
  OutputTap tap;
  const bool tapped = tap.divert();  // no pipes: the command prints straight to ours, and its markers are not read
  pid_t pid = spawn_command(command, env, g.cgroup, g.srun);
  if (tapped) tap.restore();
  if (pid < 0) {
    std::cerr << "task-submit: cannot start bash\n";
    daemon.request("DELETE", api_path::lease(g.id) + "?reason=could+not+start", token, "", 10);
    return kRefused;
  }
  return supervise(daemon, token, o, g, pid, tapped ? &tap : nullptr);
}

}  // namespace

int run_task_submit(int argc, char** argv) {
  CLI::App app{"task-submit: borrow NPU cards from the pto-runner daemon's queue and run a command on them "
               "(the incumbent task-submit's flags)"};
  app.set_version_flag("--version", std::string("pto-task-submit " PTO_RUNNER_VERSION " (git ") + kBuildCommit + ")");
  int exit_code = 0;
  auto o = std::make_shared<Options>();
  app.add_option("--device", o->device, "auto, a card id, or ids A,B (default auto when --device-num is given)");
  app.add_option("--device-num", o->device_num, "How many cards (with --device auto)")->check(CLI::Range(1, 4096));
  app.add_option("--device-type", o->device_type,
                 "Only cards of this type (runner.yml devices.types; default $PTO_RUNNER_DEVICE_TYPE, which a step's "
                 "device-type sets)");
  app.add_flag("--no-device", o->no_device, "Run without a card (no lease)");
  app.add_option("--timeout", o->timeout, "Seconds to wait for the cards (0: as long as it takes)")->check(CLI::Range(0.0, 7 * 86400.0));
  app.add_option("--max-time", o->max_time, "Seconds the command may run; then it is killed, exit 137 (0: no limit)")
      ->check(CLI::Range(0.0, 7 * 86400.0));
  app.add_option("--run", o->run, "The command (bash -c); {} becomes the card ids");
  app.add_flag("--list", o->list, "List the daemon's active leases");
  app.add_option("--find", o->find, "Print the ids of active leases whose command contains this text");
  app.add_option("--kill", o->kill, "End a lease: kill what runs under it and free its cards");
  app.add_option("--server", o->server, "Daemon URL (default $PTO_RUNNER_SERVER, else http://127.0.0.1:8787)");
  app.add_option("--token-file", o->token_file, "Token file (default $PTO_RUNNER_LEASE_TOKEN in a step, else $PTO_RUNNER_TOKEN)");
  app.footer("Exit codes: the command's own; 126 the daemon refused (no such card, none can ever serve it, shutting down, "
             "unreachable); 3 the daemon's address is served by another user (nothing was sent to it); 137 killed at --max-time or the lease revoked; 1 no card within --timeout; 130/143 interrupted.");
  app.callback([o, &exit_code] {
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
    } else if (o->list || !o->find.empty()) {
      exit_code = list_leases(daemon, *o);
    } else if (!o->kill.empty()) {
      exit_code = kill_lease(daemon, token, o->kill);
    } else if (o->run.empty()) {
      std::cerr << "task-submit: nothing to do: give --run CMD (or --list, --find, --kill)\n";
      exit_code = 2;
    } else if (o->no_device) {
      int status = 0;
      ::waitpid(spawn_command(o->run, {}), &status, 0);
      exit_code = exit_code_of(status);
    } else {
      exit_code = run_leased(daemon, token, *o);
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
