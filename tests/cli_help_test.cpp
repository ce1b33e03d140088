// Every command's --help says its exit codes (SPEC "What the docs and the CLI say is true"): the list of
// commands is read from `pto-runner --help` itself, so a new command without them fails here.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

using pto::test::CommandResult;
using pto::test::run_cli;

namespace {

/// The names under "Subcommands:" of a CLI11 help text.
std::vector<std::string> subcommands_of(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  bool listing = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Subcommands:", 0) == 0) {
      listing = true;
      continue;
    }
    if (!listing) continue;
    if (line.rfind("  ", 0) != 0) break;
    std::istringstream words(line);
    std::string name;
    words >> name;
    out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("cli: every command and subcommand's --help gives its exit codes, and the client commands say where they find the daemon", "[cli]") {
  const CommandResult top = run_cli({"--help"});
  REQUIRE(top.exit_code == 0);
  const std::vector<std::string> commands = subcommands_of(top.out);
  REQUIRE(commands.size() >= 14);
  for (const auto& c : commands) {
    const CommandResult help = run_cli({c, "--help"});
    INFO(c << "\n" << help.out << help.err);
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("Exit codes:") != std::string::npos);
    for (const auto& sub : subcommands_of(help.out)) {
      const CommandResult nested = run_cli({c, sub, "--help"});
      INFO(c << " " << sub << "\n" << nested.out);
      CHECK(nested.out.find("Exit codes:") != std::string::npos);
    }
  }
  for (const char* client : {"status", "submit", "bisect", "tests"}) {
    const CommandResult help = run_cli({client, "--help"});
    INFO(client << "\n" << help.out);
    CHECK(help.out.find("$PTO_RUNNER_CONFIG, ROOT/runner.yml, /etc/pto-runner/runner.yml") != std::string::npos);
    CHECK(help.out.find("Before the command: --root DIR") != std::string::npos);
  }
  CHECK(run_cli({"run", "--help"}).out.find("a2a3:0-7,a5:8-9") != std::string::npos);
  CHECK(run_cli({"toolchain", "setup", "--help"}).out.find("pto-runner --root DIR toolchain setup ...") != std::string::npos);
  CHECK(run_cli({"serve", "--help"}).out.find("--time-scale FLOAT:FLOAT in [1e-06 - 1e+06]=0.01") != std::string::npos);
}

TEST_CASE("cli: $PTO_RUNNER_CONFIG names the host settings the client commands read, as an installed host's /etc/pto-runner/runner.yml", "[cli]") {
  pto::test::TempDir dir;
  dir.write("etc/runner.yml", "listen: 127.0.0.1:1\nstate-dir: " + dir.str() + "/state\n");
  // Nothing listens on port 1: the command says it cannot reach the address that file names.
  const CommandResult r = run_cli({"--root", dir.str(), "status"}, {{"PTO_RUNNER_CONFIG", dir.str() + "/etc/runner.yml"}});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("127.0.0.1:1") != std::string::npos);
}
