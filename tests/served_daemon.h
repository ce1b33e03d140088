#pragma once
// A `pto-runner serve` started by a test on a free loopback port, with its own root, state and lock
// directories, and helpers for the API (used by the daemon, source and GitHub output tests).
#include <signal.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "test_support.h"
#include "util/api_paths.h"

namespace pto::test {

using nlohmann::json;

struct Served {
  TempDir dir;
  Spawned proc;
  int port = 0;
  std::string token;
  std::string devices = "2";        // --devices
  std::string device_groups;        // --device-groups, when set
  std::map<std::string, std::string> env;  // added to the daemon's environment
  std::string state_dir;  // default: dir/state
  std::string listen = "127.0.0.1:0";  // --listen
  std::string scheme = "http";
  std::string state() const { return state_dir.empty() ? (dir.path() / "state").string() : state_dir; }
  std::string locks() const { return (dir.path() / "locks").string(); }
  std::string url(const std::string& path = "") const { return scheme + "://127.0.0.1:" + std::to_string(port) + path; }

  /// `extra` is appended to the serve command line (e.g. --config FILE).
  void start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"serve", "--root", dir.str(), "--listen", listen, "--state-dir", state(),
                                     "--lock-dir", locks()};
    if (!devices.empty()) args.insert(args.end(), {"--devices", devices});  // "": runner.yml's cards
    if (!device_groups.empty()) args.insert(args.end(), {"--device-groups", device_groups});
    args.insert(args.end(), extra.begin(), extra.end());
    proc = spawn_cli(args, env);
    const bool up = wait_until([&] { return read_file(proc.out).find("listening on " + scheme + "://") != std::string::npos; }, 20);
    INFO("the daemon said: " << read_file(proc.out) << read_file(proc.err));
    REQUIRE(up);
    std::string out = read_file(proc.out);
    const std::string bound = out.substr(out.find("listening on " + scheme + "://") + 16 + scheme.size());  // ADDRESS:PORT
    port = std::stoi(bound.substr(bound.find(':') + 1));
    token = read_file(fs::path(state()) / "token");
    while (!token.empty() && token.back() == '\n') token.pop_back();
  }
  // SIGINT: cancel whatever runs (SIGTERM would drain: let accepted runs finish).
  void stop(int sig = SIGINT) {
    if (proc.pid > 0) {
      ::kill(proc.pid, sig);
      wait_cli(proc);
      proc.pid = -1;
    }
  }
  ~Served() { stop(); }

  pto::ApiResponse post(const std::string& path, const json& body, const std::string& tok = "use-own") const {
    return pto::api_request("POST", url(path), tok == "use-own" ? token : tok, body.dump());
  }
  json get(const std::string& path) const {
    auto r = pto::api_request("GET", url(path));
    REQUIRE(r.reached);
    INFO(r.body);
    REQUIRE(r.status == 200);
    return json::parse(r.body);
  }
  /// GET `path` (the status page by default) rendered by headless Chromium with its scripts run (each page
  /// draws itself from the API). False when chromium is not installed; REQUIREs that it ran when it is.
  bool page_dom(std::string& dom, const std::string& path = "/") const {
    if (sh("command -v chromium >/dev/null") != 0) return false;
    REQUIRE(sh("timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=" +
                   (dir.path() / "chromium-profile").string() + " --virtual-time-budget=5000 --dump-dom " + url(path) +
                   " 2>/dev/null",
               &dom) == 0);
    return true;
  }
  /// POST /api/v1/runs, which must be accepted (201): the new run's id.
  std::string submit_run(const json& body = json::object()) const {
    auto r = post(api_path::kRuns, body);
    INFO(r.body);
    REQUIRE(r.status == 201);
    return json::parse(r.body)["id"];
  }
  json wait_run(const std::string& id, double seconds = 30) const {
    json run;
    REQUIRE(wait_until([&] {
      run = get(api_path::run(id));
      std::string st = run["state"];
      return st != "running" && st != "cancelling";
    }, seconds));
    return run;
  }
};

}  // namespace pto::test
