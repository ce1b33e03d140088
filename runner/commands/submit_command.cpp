// `pto-runner submit`: the GitHub Actions client. It submits a run (of a commit, when the daemon has a
// `source`), follows it, prints progress and failed steps' log tails, writes the step summary, and exits with
// the run's result. Inside Actions, every byte that came from a step or a definition file is printed as
// inert text (report/actions_output) and the runner's own output is workflow commands.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "plan/plan.h"
#include "util/api_paths.h"
#include "commands/commands.h"
#include "commands/run_follower.h"
#include "report/actions_output.h"
#include "report/diagnostics_view.h"
#include "report/run_view.h"
#include "util/json_text.h"
#include "commands/run_mirror.h"
#include "util/clock.h"

namespace pto {

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

std::string env_or(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Where the run comes from in GitHub Actions, so the daemon's status links back to it.
nlohmann::json github_context() {
  static const std::pair<const char*, const char*> vars[] = {
      {"repository", "GITHUB_REPOSITORY"}, {"run_id", "GITHUB_RUN_ID"},       {"run_attempt", "GITHUB_RUN_ATTEMPT"},
      {"server_url", "GITHUB_SERVER_URL"}, {"workflow", "GITHUB_WORKFLOW"},   {"event_name", "GITHUB_EVENT_NAME"},
      {"actor", "GITHUB_ACTOR"},           {"head_ref", "GITHUB_HEAD_REF"}};
  nlohmann::json g = nlohmann::json::object();
  for (const auto& [field, var] : vars)
    if (std::string v = env_or(var); !v.empty()) g[field] = v;
  return g;
}

struct SubmitOptions {
  std::string server, token_file, ref, sha, attach;
  std::vector<std::string> jobs, env, secrets;
  bool wait = false, follow = false, control = false, no_reuse = false;
  double poll = 1.0, heartbeat = 300;
  int tail = 40;
};

/// What is posted: the jobs, where the commit comes from, --env and --secret (from this environment). "" or
/// what is wrong with the command line.
std::string submission_body(const SubmitOptions& o, const std::string& key, nlohmann::json& body) {
  body = {{"jobs", o.jobs}};
  if (std::string ref = o.ref.empty() ? env_or("GITHUB_REF") : o.ref; !ref.empty()) body["ref"] = ref;
  if (std::string sha = o.sha.empty() ? env_or("GITHUB_SHA") : o.sha; !sha.empty()) body["sha"] = sha;
  if (nlohmann::json g = github_context(); !g.empty()) body["github"] = g;
  if (!o.env.empty()) {
    body["env"] = nlohmann::json::object();
    for (const auto& kv : o.env) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) return "--env wants NAME=value, got '" + kv + "'";
      body["env"][kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  if (!o.secrets.empty()) {
    body["secrets"] = nlohmann::json::object();
    for (const auto& name : o.secrets) {
      const char* v = std::getenv(name.c_str());
      if (!v) return "--secret " + name + ": $" + name + " is not set";
      body["secrets"][name] = v;
    }
  }
  if (!key.empty()) body["attach"] = key;
  if (o.control) body["control"] = true;
  if (o.no_reuse) body["reuse"] = false;
  return "";
}

/// The run's end as the GitHub log shows it: every failed step's log tail (so the log says why without a trip
/// to the server) and an annotation with its verdict; a step green after a failure charged to a card, the
/// host or a flaky test is green, and a warning says why.
void report_failed_steps(ActionsOutput& out, const nlohmann::json& run, const std::string& server, const std::string& token,
                         const std::string& id, int tail) {
  for (const auto& job : run["jobs"])
    for (const auto& s : job["steps"]) {
      std::string state = s.value("state", "");
      if (state != "failed" && state != "timed_out") continue;
      const std::string title = title_of(job, s), end = describe_step_end(s);
      ApiResponse lg =
          api_request("GET", server + api_path::step_log(id, s.value("id", "")) + "?tail=" + std::to_string(std::max(1, tail)), token);
      std::string heading = title + " (" + state + (end.empty() ? "" : ", " + end) + "), last lines of its log";
      if (out.github()) out.group(heading);
      else std::cout << "--- " << heading << "\n";
      std::cout.flush();
      if (lg.reached && lg.status == 200) out.text(lg.body);
      out.endgroup();
      const std::string verdict = s.contains("verdict") && s["verdict"].is_string() ? s["verdict"].get<std::string>() : "";
      out.command("error", {{"title", title + " failed"}}, verdict.empty() ? state + (end.empty() ? "" : ", " + end) : verdict);
      // One annotation per failed test at its file and line, as GitHub shows them beside the diff (at most 50).
      int annotated = 0;
      if (s.contains("tests") && s["tests"].is_object())
        for (const auto& c : s["tests"].value("failed_tests", nlohmann::json::array())) {
          if (++annotated > 50) break;
          CommandProperties props = {{"title", c.value("id", "") + " " + c.value("result", "") +
                                                   (c["cause"].is_string() ? " (" + c["cause"].get<std::string>() + ")" : "")}};
          if (c.contains("file") && c["file"].is_string()) props.push_back({"file", c["file"].get<std::string>()});
          if (c.contains("line") && c["line"].is_number_integer()) props.push_back({"line", std::to_string(c["line"].get<int>())});
          out.command("error", props, c.contains("message") && c["message"].is_string() ? c["message"].get<std::string>() : "failed");
        }
    }
  for (const auto& job : run["jobs"])
    for (const auto& s : job["steps"]) {
      if (s.value("state", "") != "succeeded" || !s.contains("verdict") || !s["verdict"].is_string()) continue;
      // A benchmark's verdict is its measure: a warning only when it got worse (a gated one is red instead).
      if (s.contains("perf") && s["perf"].is_object()) {
        const nlohmann::json& p = s["perf"];
        if (p.contains("change") && p["change"] == "slower")
          out.command("warning", {{"title", title_of(job, s) + ": " + p.value("metric", std::string()) + " got worse"}}, s["verdict"].get<std::string>());
        continue;
      }
      out.command("warning", {{"title", title_of(job, s) + " passed on a retry (" + s.value("cause", "") + ")"}}, s["verdict"].get<std::string>());
    }
}

/// $GITHUB_STEP_SUMMARY: the run's table, each step's wait against its first forecast.
void write_step_summary(nlohmann::json run, const std::map<std::string, double>& expected_wait, const std::string& server) {
  const std::string summary = env_or("GITHUB_STEP_SUMMARY");
  if (summary.empty()) return;
  for (auto& job : run["jobs"])
    for (auto& s : job["steps"])
      if (auto e = expected_wait.find(s.value("id", "")); e != expected_wait.end()) s["expected_wait_seconds"] = e->second;
  std::string md = markdown_summary(run);
  if (run.contains("request") && run["request"].contains("sha") && !run["request"]["sha"].get<std::string>().empty())
    md = "Commit `" + run["request"]["sha"].get<std::string>() + "` on " + server + "\n\n" + md;
  std::ofstream(summary, std::ios::app) << md;
}

int signal_exit() { return g_signal == SIGINT ? to_int(ExitCode::Interrupted) : to_int(ExitCode::Terminated); }

/// Follows run `id` to its end (or this attached client's jobs' end), printing as it goes; a signal cancels
/// the run (or detaches this client, cancelling its own jobs). The last run JSON, or nothing (with
/// `exit_code`) when the server was lost or the cancel could not be sent.
std::optional<nlohmann::json> follow_run(const SubmitOptions& o, ActionsOutput& out, const std::string& server, const std::string& token,
                                         const std::string& id, const std::function<ApiResponse(bool cancel)>& detach, RunFollower& follower,
                                         bool& cancel_sent, int& exit_code) {
  // A cancelled GitHub job sends SIGINT then SIGTERM: cancel the remote run so no card stays held.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto unreachable_since = steady_now();
  bool unreachable = false;
  nlohmann::json run;
  RunMirror mirror;
  while (true) {
    if (g_signal && !cancel_sent) {
      std::cerr << "pto-runner submit: " << (g_signal == SIGINT ? "SIGINT" : "SIGTERM") << ": cancelling "
                << (!detach ? "run " + id : "this client's jobs of run " + id) << "\n";
      ApiResponse c = !detach ? api_request("POST", server + api_path::run_cancel(id), token, "{}") : detach(true);
      cancel_sent = true;
      if (!c.reached) {
        std::cerr << "pto-runner submit: " << c.error << "\n";
        exit_code = signal_exit();
        return std::nullopt;
      }
    }
    // Reads carry the token too: a daemon beyond loopback answers no read without one (the admin token reads).
    // After the first answer, only what changed since (commands/run_mirror): a poll costs what changed. The
    // daemon holds each poll until the run ends or the interval passes: the end is heard at once.
    const auto asked = steady_now();
    const std::string query = mirror.query();
    ApiResponse g = api_request("GET", server + api_path::run(id) + query + (query.empty() ? "?" : "&") + "wait=" + std::to_string(o.poll), token,
                                "", static_cast<long>(o.poll) + 30);  // held up to the interval, then the usual 30 s
    if (g.wrong_listener) {  // another user's listener has the daemon's address: it is not coming back there
      std::cerr << "pto-runner submit: " << g.error << "\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return std::nullopt;
    }
    if (!g.reached || g.status != 200) {
      if (!unreachable) unreachable_since = steady_now();
      unreachable = true;
      if (steady_now() - unreachable_since > std::chrono::seconds(30)) {
        std::cerr << "pto-runner submit: lost the server: " << (g.reached ? "HTTP " + std::to_string(g.status) : g.error) << "\n";
        exit_code = to_int(ExitCode::Infrastructure);
        return std::nullopt;
      }
    } else {
      unreachable = false;
      if (mirror.take(nlohmann::json::parse(g.body, nullptr, false))) {
        bool done = false;
        // poll() cuts an attached client's run to its own jobs: a copy, the mirror stays whole.
        nlohmann::json attached_copy = detach ? mirror.run() : nlohmann::json();
        nlohmann::json& seen = detach ? attached_copy : mirror.run();
        // What the delta carried is what is read (with the steps running); an attached client's cut copy whole.
        std::string text = detach ? follower.poll(seen, done) : follower.poll(seen, done, mirror.changed(), &mirror.queued());
        if (done) run = std::move(seen);
        if (done && mirror.merged()) {
          // The report and the summary read every field: the whole run once, as it ended (what changed since
          // the last delta is printed too).
          ApiResponse whole = api_request("GET", server + api_path::run(id), token);
          nlohmann::json last = whole.reached && whole.status == 200 ? nlohmann::json::parse(whole.body, nullptr, false) : nlohmann::json();
          if (last.is_object() && last.contains("jobs")) {
            run = std::move(last);
            text += follower.poll(run, done);
          }
        }
        if (!text.empty()) out.text(text);
        std::fflush(stdout);
        if (done) return run;
      }
    }
    // What the interval has left (all of it after an error, none after a held answer; a daemon that does not
    // hold answers at once).
    std::this_thread::sleep_for(std::chrono::duration<double>(o.poll) - (steady_now() - asked));
  }
}

}  // namespace

void register_submit_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto o = std::make_shared<SubmitOptions>();
  auto* cmd = app.add_subcommand("submit", "The GitHub Actions client: submit a run to a daemon, stream its progress, exit "
                                           "with its result; SIGINT/SIGTERM cancels the remote run");
  cmd->add_option("--job", o->jobs, "Only these jobs (and the jobs they need)");
  cmd->add_flag("--wait", o->wait, "Follow the run to its end and exit with its result");
  cmd->add_flag("--follow", o->follow, "With --wait: stream running steps' output live, prefixed [job / step]");
  cmd->add_flag("--no-reuse", o->no_reuse, "Run every step, even one whose inputs were already tested green (docs/maintainers.md, \"Reuse\")");
  cmd->add_flag("--control", o->control, "A step that fails also runs on the merge base: its verdict says whether main fails too");
  add_daemon_options(*cmd, o->server, o->token_file, "the admin token");
  cmd->add_option("--ref", o->ref, "Git ref under test (default $GITHUB_REF)");
  cmd->add_option("--sha", o->sha, "Commit under test (default $GITHUB_SHA); required by a daemon with a source");
  cmd->add_option("--env", o->env, "NAME=value added to every step's environment (repeatable)");
  cmd->add_option("--secret", o->secrets, "NAME: the value of $NAME in this environment reaches every step's environment as NAME, "
                                          "and is shown as *** in every log and summary (repeatable)");
  auto* attach = cmd->add_option("--attach", o->attach,
                                 "One run per workflow run: join the run of KEY (default $GITHUB_REPOSITORY/$GITHUB_RUN_ID/"
                                 "$GITHUB_RUN_ATTEMPT), adding these --job's; follow and exit with their result (implies --wait)")
                     ->expected(0, 1);
  cmd->add_option("--poll-interval", o->poll, "Seconds between progress polls")->check(CLI::Range(0.05, 60.0));
  cmd->add_option("--heartbeat", o->heartbeat, "Without --follow: seconds between 'still running' lines for long steps")
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--log-tail", o->tail, "Lines of each failed step's log to print")->check(CLI::Range(0, 100000));
  add_footer(*cmd, "the run's own (0, 1, 3) with --wait, else 0 once submitted; 2 bad usage, a rejected run or "
              "a commit whose definitions do not load (its findings are printed, as annotations inside Actions); 3 the "
              "server or the source repository cannot be reached; 130/143 after SIGINT/SIGTERM cancelled the remote run.");
  cmd->callback([o, &common, &exit_code, attach] {
    ActionsOutput out(stdout, inside_github_actions());
    std::string key;
    if (attach->count()) {
      key = !o->attach.empty() ? o->attach
            : env_or("GITHUB_RUN_ID").empty()
                ? ""
                : env_or("GITHUB_REPOSITORY") + "/" + env_or("GITHUB_RUN_ID") + "/" + (env_or("GITHUB_RUN_ATTEMPT").empty() ? "1" : env_or("GITHUB_RUN_ATTEMPT"));
      if (key.empty() || o->jobs.empty()) {
        std::cerr << "pto-runner submit: --attach needs " << (key.empty() ? "a KEY (outside GitHub Actions)" : "its jobs (--job NAME)") << "\n";
        exit_code = to_int(ExitCode::BadInput);
        return;
      }
      o->wait = true;
    }
    const std::string server = server_url(o->server, common);
    std::string err;
    std::string token = client_token(o->token_file, common, err);
    nlohmann::json body;
    if (err.empty()) err = submission_body(*o, key, body);
    if (!err.empty()) {
      std::cerr << "pto-runner submit: " << err << "\n";
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    // A daemon with a source fetches and checks out the commit before it answers: give it time. A later
    // client of a workflow run whose run is still being made retries.
    ApiResponse r = api_request("POST", server + api_path::kRuns, token, dump_json(body), 3600);
    for (int tries = 0; !key.empty() && r.reached && r.status == 503 && r.body.find("\"retry\"") != std::string::npos && tries < 600; ++tries) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      r = api_request("POST", server + api_path::kRuns, token, dump_json(body), 3600);
    }
    if (!r.reached) {
      std::cerr << "pto-runner submit: " << r.error << "\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    auto reply = nlohmann::json::parse(r.body, nullptr, false);
    if ((r.status != 201 && !(r.status == 200 && !key.empty())) || reply.is_discarded() || !reply.is_object()) {
      // The commit's own definition problems, each at its place in the pull request's files.
      if (r.status == 400 && reply.is_object() && reply.contains("findings") && reply["findings"].is_array()) {
        print_findings(out, diagnostics_from_json(reply["findings"]));
        out.text("pto-runner submit: the run was refused: " + std::to_string(reply["findings"].size()) +
                 " problem(s) in the definitions" + (reply.contains("sha") ? " of commit " + reply.value("sha", "") : "") + "\n");
      } else {
        out.text("pto-runner submit: the server refused the run (HTTP " + std::to_string(r.status) + "): " + r.body + "\n");
      }
      exit_code = r.status == 401 || r.status == 403 || r.status == 400 || r.status == 409 ? to_int(ExitCode::BadInput) : to_int(ExitCode::Infrastructure);
      return;
    }
    const std::string id = reply.value("id", "");
    const std::string client = reply.value("client", "");
    if (!key.empty())
      std::cout << (reply.value("attached", false) ? "attached to run " : "submitted run ") << id << " of workflow run " << key << ": "
                << server << api_path::run(id) << std::endl;
    else
      std::cout << "submitted run " << id << ": " << server << api_path::run(id) << std::endl;
    if (!o->wait) {
      exit_code = 0;
      return;
    }
    // Attached: this client's jobs (and what they need) are what it shows and what it exits with.
    std::function<ApiResponse(bool)> detach;
    if (!key.empty())
      detach = [&](bool cancel) {
        return api_request("POST", server + api_path::run_detach(id), token, dump_json({{"client", client}, {"cancel", cancel}}));
      };
    RunFollower follower(server, token, id, {o->follow, o->heartbeat, !key.empty(), std::set<std::string>(o->jobs.begin(), o->jobs.end())});
    bool cancel_sent = false;
    std::optional<nlohmann::json> ended = follow_run(*o, out, server, token, id, detach, follower, cancel_sent, exit_code);
    if (!ended) return;
    const nlohmann::json& run = *ended;
    report_failed_steps(out, run, server, token, id, o->tail);
    if (out.github()) write_step_summary(run, follower.expected_wait(), server);
    if (!key.empty()) {
      // This client's result: its jobs' (a job skipped because what it needs failed is a failure too).
      if (!cancel_sent) detach(false);
      bool failed = false;
      for (const auto& j : run["jobs"]) {
        const std::string st = j.value("state", ""), why = j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>() : "";
        failed |= st == "failed" || st == "cancelled" || (st == "skipped" && why.find("did not succeed") != std::string::npos);
      }
      std::cout << "run " << id << ": " << (failed ? "failed" : "succeeded") << " (this client's jobs)\n";
      exit_code = cancel_sent ? signal_exit() : failed ? to_int(ExitCode::Failure) : to_int(ExitCode::Success);
      return;
    }
    std::cout << "run " << id << ": " << run.value("state", "?") << "\n";
    if (cancel_sent) {
      exit_code = signal_exit();
      return;
    }
    exit_code = run.contains("result") && run["result"].is_number() ? run["result"].get<int>() : to_int(ExitCode::Infrastructure);
  });
}

}  // namespace pto
