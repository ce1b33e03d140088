// `bisect`: asks a daemon to find the commit that broke a step (or a test), and follows it to its end
// (SPEC "Find the commit"; the host's side is bisect/bisections, the policy bisect/bisection). Prints
// each probe as it ends and, at the end, the first bad commit with every probe's run. Exit 0: found; 1: it
// ended without a culprit (bad passed, good failed, a step missing at a commit: said); 2: bad usage or a
// request the daemon refused; 3: the daemon is unreachable; 130/143: interrupted (the bisection is cancelled).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "commands/commands.h"
#include "config/project.h"
#include "plan/plan.h"
#include "util/api_paths.h"
#include "util/exit_code.h"
#include "util/json_text.h"

namespace pto {

namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

/// The job and step whose `perf:` is named `metric` in the definitions at `load`'s root; "" or why not.
std::string find_metric_step(const LoadOptions& load, const std::string& metric, std::string& job, std::string& step) {
  Diagnostics diags;
  Project project = load_project(load, diags);
  if (diags.has_input_errors()) return "the definitions at " + load.root + " do not load (pto-runner lint says why)";
  Plan plan = build_plan(project, PlanOptions{}, diags);
  std::vector<std::string> names;
  for (const PlanJob& j : plan.jobs)
    for (const PlanStep& s : j.steps) {
      if (!s.perf) continue;
      names.push_back(s.perf->name);
      if (s.perf->name != metric) continue;
      job = j.name, step = s.name;
      return "";
    }
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  return "no step of the definitions at " + load.root + " measures it (" + (known.empty() ? "none has perf:" : "their metrics: " + known) + ")";
}

void print_probe(const nlohmann::json& p, const std::string& server) {
  std::cout << "  probe " << p.value("sha", "").substr(0, 12) << " (" << p.value("phase", "") << "): " << p.value("result", "");
  if (!p.value("detail", "").empty()) std::cout << " - " << p.value("detail", "");
  if (p["run"].is_string()) std::cout << "  " << server << api_path::run_page(p["run"].get<std::string>());
  std::cout << "\n";
}

}  // namespace

void register_bisect_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::string server, token_file, good, bad, job, step, test, repeat = "1", metric;
    bool no_wait = false;
    double poll = 1;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bisect", "Find the commit that broke a step (or one test) between a good and a bad commit, on the cards");
  cmd->add_option("--good", o->good, "A commit where the step passes (full sha)")->required();
  cmd->add_option("--bad", o->bad, "A later commit where it fails (full sha)")->required();
  cmd->add_option("--job", o->job, "The job of the step (with --metric: found in the definitions at --root)");
  cmd->add_option("--metric", o->metric,
                  "A perf metric (a step's perf.name): find the commit that made it slower; each probe compares its commit's build "
                  "with --good's on one card");
  cmd->add_option("--step", o->step, "The step's name (default: the job's last step)");
  cmd->add_option("--test", o->test, "Only this test of the step (a pytest node id)");
  cmd->add_option("--repeat", o->repeat, "Probes per verdict: N, or auto (measures the failure rate at bad first)");
  add_daemon_options(*cmd, o->server, o->token_file, "the admin token");
  add_footer(*cmd, "0 the first bad commit found (or --no-wait: started); 1 the bisection ended without a culprit (it says "
                   "why); 2 bad usage or the daemon refused it (no source:, an unknown job or commit, no admin token); 3 the "
                   "daemon cannot be reached or failed; 130/143 interrupted (the bisection goes on in the daemon).");
  cmd->add_flag("--no-wait", o->no_wait, "Start it, print its id and page, and return");
  cmd->add_option("--poll-interval", o->poll, "Seconds between reads of its progress")->check(CLI::Range(0.05, 60.0));
  cmd->callback([o, &common, &exit_code] {
    const std::string server = server_url(o->server, common);
    std::string err;
    const std::string token = client_token(o->token_file, common, err);
    if (!err.empty()) {
      std::cerr << "pto-runner bisect: " << err << "\n";
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    if (!o->metric.empty() && o->job.empty()) {
      // The metric's step, from the definitions here (the checkout the command runs in).
      if (std::string e = find_metric_step(common.load, o->metric, o->job, o->step); !e.empty()) {
        std::cerr << "pto-runner bisect: --metric " << o->metric << ": " << e << "\n";
        exit_code = to_int(ExitCode::BadInput);
        return;
      }
    }
    if (o->job.empty()) {
      std::cerr << "pto-runner bisect: --job is required (or --metric, whose step names its job)\n";
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    nlohmann::json body = {{"good", o->good}, {"bad", o->bad}, {"job", o->job}, {"step", o->step}, {"test", o->test}};
    if (!o->metric.empty()) body["metric"] = o->metric;
    if (o->repeat == "auto") body["repeat"] = "auto";
    else {
      try {
        body["repeat"] = std::stoi(o->repeat);
      } catch (...) {
        std::cerr << "pto-runner bisect: --repeat is auto or a number, got '" << o->repeat << "'\n";
        exit_code = to_int(ExitCode::BadInput);
        return;
      }
    }
    ApiResponse r = api_request("POST", server + api_path::kBisections, token, dump_json(body));
    if (!r.reached) {
      std::cerr << "pto-runner bisect: cannot reach " << server << ": " << r.error << "\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    nlohmann::json made = nlohmann::json::parse(r.body, nullptr, false);
    if (r.status != 201) {
      std::cerr << "pto-runner bisect: refused (HTTP " << r.status << "): "
                << (made.is_object() ? made.value("error", r.body) : r.body) << "\n";
      exit_code = r.status >= 500 ? to_int(ExitCode::Infrastructure) : to_int(ExitCode::BadInput);
      return;
    }
    const std::string id = made.value("id", "");
    std::cout << "bisection " << id << ": " << made.value("commits", 0) << " commits; " << server << api_path::bisection_page(id) << "\n";
    if (o->no_wait) {
      exit_code = 0;
      return;
    }
    ::signal(SIGINT, on_signal);
    ::signal(SIGTERM, on_signal);
    std::set<std::string> shown;  // probes printed (run or index:phase)
    for (;;) {
      if (const int sig = g_signal.load()) {
        api_request("POST", server + api_path::bisection_cancel(id), token, "{}");
        std::cerr << "pto-runner bisect: interrupted: bisection " << id << " cancelled\n";
        exit_code = sig == SIGINT ? to_int(ExitCode::Interrupted) : to_int(ExitCode::Terminated);
        return;
      }
      ApiResponse g = api_request("GET", server + api_path::bisection(id), token, "");
      nlohmann::json b = g.reached && g.status == 200 ? nlohmann::json::parse(g.body, nullptr, false) : nlohmann::json();
      if (b.is_object()) {
        int n = 0;
        for (const auto& p : b["probes"]) {
          const std::string key = std::to_string(n++);
          const std::string result = p.value("result", "");
          if (result == "queued" || result == "running" || result == "unneeded" || shown.count(key)) continue;
          shown.insert(key);
          print_probe(p, server);
        }
        if (b.value("state", "running") != "running") {
          std::cout << "bisection " << id << " " << b.value("state", "") << " after " << b.value("runs_used", 0) << " probe runs\n";
          if (b["culprit"].is_string()) {
            const std::string culprit = b["culprit"].get<std::string>();
            std::string subject;  // the commit's subject line, as `git bisect` prints it
            const auto commits = b.value("commits", nlohmann::json::array()), subjects = b.value("subjects", nlohmann::json::array());
            for (std::size_t i = 0; i < commits.size() && i < subjects.size(); ++i)
              if (commits[i] == culprit && subjects[i].is_string()) subject = subjects[i].get<std::string>();
            for (char& c : subject)  // a commit's text: no control character reaches the terminal
              if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
            std::cout << "first bad commit: " << culprit << (subject.empty() ? "" : " " + subject) << "\n";
            exit_code = 0;
          } else {
            std::cout << (b["error"].is_string() ? b["error"].get<std::string>() : std::string("no culprit")) << "\n";
            exit_code = to_int(ExitCode::Failure);
          }
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(o->poll));
    }
  });
}

}  // namespace pto
