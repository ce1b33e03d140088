#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "commands/commands.h"
#include "util/json_text.h"

namespace pto {

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

std::string describe(const nlohmann::json& s) {
  std::string out = s.value("state", "?");
  if (s.contains("exit_code") && !s["exit_code"].is_null()) out += ", exit " + std::to_string(s["exit_code"].get<int>());
  if (s.contains("signal") && !s["signal"].is_null()) out += ", signal " + std::to_string(s["signal"].get<int>());
  if (s.contains("error") && !s["error"].is_null()) out += ", " + s["error"].get<std::string>();
  return out;
}

}  // namespace

void register_submit_command(CLI::App& app, CommonOptions&, int& exit_code) {
  struct Opts {
    std::string server, token_file, ref, sha;
    std::vector<std::string> jobs, env;
    bool wait = false;
    double poll = 1.0;
    int tail = 40;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("submit", "The GitHub Actions client: submit a run to a daemon, stream its progress, exit "
                                           "with its result; SIGINT/SIGTERM cancels the remote run");
  cmd->add_option("--server", o->server, "Daemon URL, e.g. http://127.0.0.1:8787")->required();
  cmd->add_option("--job", o->jobs, "Only these jobs (and the jobs they need)");
  cmd->add_flag("--wait", o->wait, "Follow the run to its end and exit with its result");
  cmd->add_option("--token-file", o->token_file, "Bearer token file (default: $PTO_RUNNER_TOKEN)");
  cmd->add_option("--ref", o->ref, "Git ref under test (default $GITHUB_REF)");
  cmd->add_option("--sha", o->sha, "Commit under test (default $GITHUB_SHA)");
  cmd->add_option("--env", o->env, "NAME=value added to every step's environment (repeatable)");
  cmd->add_option("--poll-interval", o->poll, "Seconds between progress polls")->check(CLI::Range(0.05, 60.0));
  cmd->add_option("--log-tail", o->tail, "Lines of each failed step's log to print")->check(CLI::Range(0, 100000));
  cmd->footer("Exit codes: the run's own (0, 1, 3) with --wait, else 0 once submitted; 2 bad usage or a rejected run; "
              "3 the server cannot be reached; 130/143 after SIGINT/SIGTERM cancelled the remote run.");
  cmd->callback([o, &exit_code] {
    const std::string server = trim_server(o->server);
    std::string err;
    std::string token = read_token(o->token_file, err);
    if (!err.empty()) {
      std::cerr << "pto-runner submit: " << err << "\n";
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    nlohmann::json body = {{"jobs", o->jobs}};
    const char* gh_ref = std::getenv("GITHUB_REF");
    const char* gh_sha = std::getenv("GITHUB_SHA");
    if (!o->ref.empty() || gh_ref) body["ref"] = o->ref.empty() ? gh_ref : o->ref;
    if (!o->sha.empty() || gh_sha) body["sha"] = o->sha.empty() ? gh_sha : o->sha;
    if (!o->env.empty()) {
      body["env"] = nlohmann::json::object();
      for (const auto& kv : o->env) {
        auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) {
          std::cerr << "pto-runner submit: --env wants NAME=value, got '" << kv << "'\n";
          exit_code = to_int(ExitCode::BadInput);
          return;
        }
        body["env"][kv.substr(0, eq)] = kv.substr(eq + 1);
      }
    }
    ApiResponse r = api_request("POST", server + "/api/v1/runs", token, dump_json(body));
    if (!r.reached) {
      std::cerr << "pto-runner submit: " << r.error << "\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    auto reply = nlohmann::json::parse(r.body, nullptr, false);
    if (r.status != 201 || reply.is_discarded()) {
      std::cerr << "pto-runner submit: the server refused the run (HTTP " << r.status << "): " << r.body << "\n";
      exit_code = r.status == 401 || r.status == 400 ? to_int(ExitCode::BadInput) : to_int(ExitCode::Infrastructure);
      return;
    }
    const std::string id = reply.value("id", "");
    std::cout << "submitted run " << id << ": " << server << "/api/v1/runs/" << id << std::endl;
    if (!o->wait) {
      exit_code = 0;
      return;
    }
    // A cancelled GitHub job sends SIGINT then SIGTERM: cancel the remote run so no card stays held.
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    const bool github = std::getenv("GITHUB_ACTIONS") && std::string(std::getenv("GITHUB_ACTIONS")) == "true";
    std::map<std::string, std::string> last;
    bool cancel_sent = false;
    auto unreachable_since = std::chrono::steady_clock::now();
    bool unreachable = false;
    nlohmann::json run;
    while (true) {
      if (g_signal && !cancel_sent) {
        std::cerr << "pto-runner submit: " << (g_signal == SIGINT ? "SIGINT" : "SIGTERM") << ": cancelling run " << id << "\n";
        ApiResponse c = api_request("POST", server + "/api/v1/runs/" + id + "/cancel", token, "{}");
        cancel_sent = true;
        if (!c.reached) {
          std::cerr << "pto-runner submit: " << c.error << "\n";
          exit_code = g_signal == SIGINT ? to_int(ExitCode::Interrupted) : to_int(ExitCode::Terminated);
          return;
        }
      }
      ApiResponse g = api_request("GET", server + "/api/v1/runs/" + id);
      if (!g.reached || g.status != 200) {
        if (!unreachable) unreachable_since = std::chrono::steady_clock::now();
        unreachable = true;
        if (std::chrono::steady_clock::now() - unreachable_since > std::chrono::seconds(30)) {
          std::cerr << "pto-runner submit: lost the server: " << (g.reached ? "HTTP " + std::to_string(g.status) : g.error) << "\n";
          exit_code = to_int(ExitCode::Infrastructure);
          return;
        }
      } else {
        unreachable = false;
        run = nlohmann::json::parse(g.body, nullptr, false);
        if (!run.is_discarded()) {
          for (const auto& job : run["jobs"])
            for (const auto& s : job["steps"]) {
              std::string key = s.value("id", ""), state = s.value("state", "");
              if (last[key] == state) continue;
              last[key] = state;
              std::string title = job.value("id", "") + " / " + s.value("name", "");
              if (state == "running") {
                std::string cards;
                for (const auto& c : s["cards"]) cards += (cards.empty() ? "" : ",") + std::to_string(c.get<int>());
                std::cout << "==> " << title << (cards.empty() ? "" : "  [cards " + cards + "]") << "\n";
              } else if (state != "pending" && state != "waiting") {
                std::cout << "<== " << title << ": " << describe(s) << "\n";
              }
            }
          std::cout.flush();
          std::string st = run.value("state", "");
          if (st != "running" && st != "cancelling") break;
        }
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(o->poll));
    }
    // The log tail of every failed step, so the GitHub log shows why without a trip to the server.
    for (const auto& job : run["jobs"])
      for (const auto& s : job["steps"]) {
        std::string state = s.value("state", "");
        if (state != "failed" && state != "timed_out") continue;
        std::string title = job.value("id", "") + " / " + s.value("name", "");
        ApiResponse lg = api_request("GET", server + "/api/v1/runs/" + id + "/steps/" + s.value("id", "") + "/log?tail=" +
                                                std::to_string(std::max(1, o->tail)));
        std::cout << (github ? "::group::" : "--- ") << title << " (" << describe(s) << "), last lines of its log\n";
        if (lg.reached && lg.status == 200) std::cout << lg.body;
        if (github) std::cout << "::endgroup::\n::error title=" << title << " failed::" << describe(s) << "\n";
      }
    std::cout << "run " << id << ": " << run.value("state", "?") << "\n";
    if (cancel_sent) {
      exit_code = g_signal == SIGINT ? to_int(ExitCode::Interrupted) : to_int(ExitCode::Terminated);
      return;
    }
    exit_code = run.contains("result") && run["result"].is_number() ? run["result"].get<int>() : to_int(ExitCode::Infrastructure);
  });
}

}  // namespace pto
