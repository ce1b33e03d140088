#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "client/api_client.h"
#include "commands/commands.h"
#include "report/run_view.h"
#include "util/json_text.h"

namespace pto {

void register_status_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  struct Opts {
    std::string server, token_file;
    std::string format = "text";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("status", "Print the daemon's status for a person: cards, queue with reasons, runs");
  add_daemon_options(*cmd, o->server, o->token_file, "a read token or the admin token (a daemon beyond loopback wants one for reads)");
  cmd->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  add_footer(*cmd, "0 printed; 2 bad usage or an unreadable token file; 3 the daemon cannot be reached, answered an error, or "
                   "its address is served by another user (nothing is sent to it).");
  cmd->callback([o, &common, &exit_code] {
    nlohmann::json s;
    std::string error;
    const std::string token = client_token(o->token_file, common, error);
    if (!error.empty()) {
      std::cerr << "pto-runner status: " << error << "\n";
      exit_code = to_int(ExitCode::BadInput);
      return;
    }
    if (!fetch_status(server_url(o->server, common), token, s, error)) {
      std::cerr << "pto-runner status: " << error << "\n";
      exit_code = to_int(ExitCode::Infrastructure);
      return;
    }
    if (o->format == "json") {
      std::cout << dump_json(s, 2) << "\n";
      exit_code = 0;
      return;
    }
    auto str = [](const nlohmann::json& j, const char* k) {
      return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string("-");
    };
    const auto& t = s["toolchain"];
    std::printf("pto-runner %s, up %.0fs%s\n", str(s, "version").c_str(), s.value("uptime_seconds", 0.0),
                s.value("simulate", false) ? " (simulated cards)" : "");
    std::printf("PTOAS %s: %s%s%s\n", str(t["pin"], "version").c_str(), str(t, "state").c_str(),
                t["bin"].is_string() ? (" at " + t["bin"].get<std::string>()).c_str() : "",
                t["last_verified"].is_string() ? (", verified " + t["last_verified"].get<std::string>()).c_str() : "");
    if (s.value("executor", "local") == "slurm") {
      std::printf("\nSLURM NODES%s\n", s["slurm_problem"].is_string() ? (" (Slurm does not answer: " + s["slurm_problem"].get<std::string>() + ")").c_str() : "");
      for (const auto& n : s["nodes"]) {
        std::printf("  %-16s %-10s %d of %d cards in use%s\n", str(n, "name").c_str(), str(n, "state").c_str(),
                    n.value("cards_used", 0), n.value("cards", 0),
                    n.value("drained", false) ? (", drained: " + str(n, "reason")).c_str() : "");
        for (const auto& st : n["steps"]) {
          std::string cards;
          for (const auto& c : st["cards"]) cards += (cards.empty() ? "" : ",") + std::to_string(c.get<int>());
          std::printf("      %-56s cards %s, Slurm job %s (run %s)\n", str(st, "label").c_str(), cards.c_str(),
                      str(st, "slurm_job").c_str(), str(st, "run").c_str());
        }
      }
    }
    if (!s["devices"].empty()) std::printf("\nCARDS\n");
    for (const auto& d : s["devices"]) {
      std::string who = d["holder"].is_object() ? d["holder"].value("label", "") : "";
      if (d["holder"].is_object() && d["holder"].contains("run")) who += "  (run " + d["holder"]["run"].get<std::string>() + ")";
      if (d["drain_reason"].is_string()) who = "drained: " + d["drain_reason"].get<std::string>();
      if (d.contains("reserved_for")) who = "reserved for queue ticket " + std::to_string(d["reserved_for"].get<long long>());
      std::string type = d.contains("type") && d["type"].is_string() ? d["type"].get<std::string>() : "";
      std::printf("  %-3d %-6s %-9s %s\n", d.value("id", 0), type.c_str(), str(d, "state").c_str(), who.c_str());
    }
    std::printf("\nQUEUE (%zu waiting)\n", s["queue"].size());
    for (const auto& q : s["queue"]) {
      // The expected start as the run page and `submit` show it; none when no usable card can serve it.
      const std::string eta = q.contains("eta_seconds") && q["eta_seconds"].is_number()
                                  ? ", expected start in ~" + format_duration(q["eta_seconds"].get<double>())
                                  : "";
      std::printf("  %-60s %d card(s), waited %.0fs%s: %s\n", str(q, "step").c_str(), q.value("devices", 0),
                  q.value("wait_seconds", 0.0), eta.c_str(), str(q, "reason").c_str());
    }
    std::printf("\nACTIVE RUNS\n");
    for (const auto& a : s["active_runs"])
      std::printf("  %s  %d/%d steps finished, %d running, %d waiting\n", str(a, "id").c_str(), a.value("steps_finished", 0),
                  a.value("steps", 0), a.value("steps_running", 0), a.value("steps_waiting", 0));
    std::printf("\nRUNS:");
    for (const auto& [k, v] : s["runs_by_result"].items()) std::printf(" %s %d", k.c_str(), v.get<int>());
    std::printf("\n");
    exit_code = 0;
  });
}

}  // namespace pto
