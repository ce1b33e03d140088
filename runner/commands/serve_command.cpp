#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands/commands.h"
#include "server/daemon.h"

namespace pto {

void register_serve_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto o = std::make_shared<DaemonOptions>();
  auto* cmd = app.add_subcommand("serve", "The daemon: accept runs over HTTP, execute them, serve status");
  cmd->add_option("--listen", o->listen, "ADDRESS:PORT (default runner.yml listen, else 127.0.0.1:8787)");
  add_device_options(*cmd, common);
  cmd->add_option("--token-file", o->token_file, "Bearer token for POST endpoints (default runner.yml token-file, else "
                                                 "a token generated in the state dir)");
  cmd->add_option("--state-dir", o->state_dir, "Journal, logs, drained cards (overrides runner.yml state-dir)");
  cmd->add_option("--lock-dir", o->lock_dir, "Card lock directory (overrides runner.yml devices.lock-dir)");
  cmd->add_flag("--simulate", o->simulate, "Steps sleep their expected duration (the lead job still runs for real)");
  cmd->add_flag("--rebuild-journal", o->rebuild_journal,
                "Move the journal aside and rebuild the history from the run directories' run.json");
  cmd->add_option("--time-scale", o->time_scale, "With --simulate: real seconds per simulated second")->check(CLI::Range(1e-6, 1e6));
  cmd->footer("Exit codes: 0 after SIGINT/SIGTERM once every run stopped; 2 bad host settings (runner.yml, flags, token "
              "file) or the state dir belongs to another daemon; 3 the host: cannot listen, use the lock directory, or "
              "open, check or write the journal (a full disk, a damaged journal: the message names the file).");
  cmd->callback([o, &common, &exit_code] {
    o->load = common.load;
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");  // the daemon's own event log, on stderr
    spdlog::set_default_logger(spdlog::stderr_color_mt("serve"));
    boost::asio::io_context io;
    Daemon daemon(io, *o);
    if (std::string err = daemon.start(); !err.empty()) {
      std::cerr << "pto-runner serve: " << err << "\n";
      exit_code = daemon.start_exit_code();
      return;
    }
    std::cout << "pto-runner serve: listening on http://127.0.0.1:" << daemon.port() << " (status: /api/v1/status)"
              << "; token file: " << daemon.token_path() << std::endl;
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code ec, int sig) {
      if (ec) return;
      std::cerr << "pto-runner serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": cancelling active runs\n";
      daemon.shutdown([&io] { io.stop(); });
    });
    io.run();
    exit_code = 0;
  });
}

}  // namespace pto
