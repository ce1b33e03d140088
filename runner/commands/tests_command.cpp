// `tests`: the test history and its mutes from the command line, over the daemon's API (docs/maintainers.md,
// "Test results"; docs/on-call.md): `tests mute ID --reason R --until D` and `tests unmute ID` (admin: the
// token found as every client finds it), `tests list [--ref R]` (flaky, muted, most failing, slowest). The
// daemon is found as `status` finds it (commands/common_options).
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "commands/commands.h"
#include "util/api_paths.h"
#include "util/json_text.h"
#include "util/secret_mask.h"  // url_encode

namespace pto {

namespace {

/// What the daemon answered: "" when 2xx, else the message to print; `exit_code` set from its kind.
std::string refused(const ApiResponse& r, int& exit_code) {
  if (!r.reached) {
    exit_code = to_int(ExitCode::Infrastructure);
    return r.error;
  }
  if (r.status >= 200 && r.status < 300) return "";
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  exit_code = r.status >= 500 ? to_int(ExitCode::Infrastructure) : to_int(ExitCode::BadInput);
  return "HTTP " + std::to_string(r.status) + ": " + (body.is_object() && body.contains("error") ? body["error"].dump() : r.body);
}

void print_tests(const char* title, const nlohmann::json& tests) {
  std::printf("\n%s (%zu)\n", title, tests.size());
  for (const auto& t : tests)
    std::printf("  %-70s runs %3d  failed %3d  flaky %3d  flip rate %.2f  mean %.1fs%s\n", t.value("id", "").c_str(), t.value("runs", 0),
                t.value("failed", 0), t.value("flaky", 0), t.value("flip_rate", 0.0), t.value("mean_duration", 0.0),
                t.value("muted", false) ? "  (muted)" : "");
}

}  // namespace

void register_tests_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::string server, token_file, id, reason, until, ref, format = "text";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tests", "The daemon's test history and its mutes: mute, unmute, list");
  cmd->require_subcommand(1);
  add_daemon_options(*cmd, o->server, o->token_file, "the admin token for mute and unmute");
  add_footer(*cmd, "0 done; 2 bad usage, or the daemon refused the request (a bad id or date, no admin token); 3 the "
              "daemon cannot be reached, or its address is served by another user.");
  auto* mute = cmd->add_subcommand("mute", "Mute a test (or a glob of tests): it still runs and is shown, its failure never "
                                           "makes a step red");
  mute->add_option("id", o->id, "The test's id, or a glob where * and ? are special")->required();
  mute->add_option("--reason", o->reason, "Why, in one line (an issue link)")->required();
  mute->add_option("--until", o->until, "The last day it is muted, YYYY-MM-DD (UTC)")->required();
  auto* unmute = cmd->add_subcommand("unmute", "End a mute made through the API (or this command)");
  unmute->add_option("id", o->id, "The mute's id, as it was made")->required();
  auto* list = cmd->add_subcommand("list", "A ref's flaky, muted, most failing and slowest tests");
  list->add_option("--ref", o->ref, "The ref (default the daemon's main branch)");
  list->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));

  auto connect = [o, &common, &exit_code](std::string& server, std::string& token) {
    server = server_url(o->server, common);
    std::string err;
    token = client_token(o->token_file, common, err);
    if (!err.empty()) {
      std::cerr << "pto-runner tests: " << err << "\n";
      exit_code = to_int(ExitCode::BadInput);
      return false;
    }
    return true;
  };
  mute->callback([o, connect, &exit_code] {
    std::string server, token;
    if (!connect(server, token)) return;
    const ApiResponse r = api_request("POST", server + api_path::tests_mute(), token,
                                      dump_json({{"id", o->id}, {"reason", o->reason}, {"until", o->until}}));
    if (std::string why = refused(r, exit_code); !why.empty()) {
      std::cerr << "pto-runner tests mute: " << why << "\n";
      return;
    }
    std::printf("muted %s until %s: %s\n", o->id.c_str(), o->until.c_str(), o->reason.c_str());
    exit_code = 0;
  });
  unmute->callback([o, connect, &exit_code] {
    std::string server, token;
    if (!connect(server, token)) return;
    const ApiResponse r = api_request("POST", server + api_path::tests_unmute(), token, dump_json({{"id", o->id}}));
    if (std::string why = refused(r, exit_code); !why.empty()) {
      std::cerr << "pto-runner tests unmute: " << why << "\n";
      return;
    }
    std::printf("unmuted %s\n", o->id.c_str());
    exit_code = 0;
  });
  list->callback([o, connect, &exit_code] {
    std::string server, token;
    if (!connect(server, token)) return;
    const ApiResponse r = api_request("GET", server + api_path::kTests + (o->ref.empty() ? std::string() : "?ref=" + url_encode(o->ref)), token);
    if (std::string why = refused(r, exit_code); !why.empty()) {
      std::cerr << "pto-runner tests list: " << why << "\n";
      return;
    }
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (!j.is_object()) {
      std::cerr << "pto-runner tests list: " << server << " sent something that is not JSON\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    exit_code = 0;
    if (o->format == "json") {
      std::cout << dump_json(j, 2) << "\n";
      return;
    }
    std::printf("%s since %s: %d tests, %d failures\n", j.value("ref", "").c_str(), j.value("since", "").c_str(), j.value("tests", 0),
                j.value("failures", 0));
    print_tests("FLAKY", j.value("flaky", nlohmann::json::array()));
    print_tests("MOST FAILING", j.value("most_failing", nlohmann::json::array()));
    print_tests("SLOWEST", j.value("slowest", nlohmann::json::array()));
    const nlohmann::json muted = j.value("muted", nlohmann::json::array());
    std::printf("\nMUTED (%zu)\n", muted.size());
    for (const auto& m : muted)
      std::printf("  %-60s until %s%s: %s (by %s)\n", m.value("id", "").c_str(), m.value("until", "").c_str(),
                  m.value("in_force", true) ? "" : " (expired)", m.value("reason", "").c_str(), m.value("by", "").c_str());
  });
}

}  // namespace pto
