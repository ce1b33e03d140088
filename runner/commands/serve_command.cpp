#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdlib>
#include <functional>
#include <iostream>

#include <spdlog/spdlog.h>

#include "commands/commands.h"
#include "util/api_paths.h"
#include "daemon/daemon.h"
#include "util/daemon_log.h"

namespace pto {

void register_serve_command(CLI::App& app, CommonOptions& common, int& exit_code) {
  auto o = std::make_shared<DaemonOptions>();
  auto log_format = std::make_shared<std::string>("text");
  auto log_level = std::make_shared<std::string>("info");
  auto* cmd = app.add_subcommand("serve", "The daemon: accept runs over HTTP, execute them, serve status");
  cmd->add_option("--listen", o->listen, "ADDRESS:PORT (default runner.yml listen, else 127.0.0.1:8787)");
  cmd->add_option("--steps-listen", o->steps_listen,
                  "Loopback ADDRESS:PORT where the steps reach the daemon (default runner.yml steps-listen, else "
                  "127.0.0.1:0: a port kept across restarts)");
  add_device_options(*cmd, common);
  cmd->add_option("--token-file", o->token_file, "Bearer token for POST endpoints (default runner.yml token-file, else "
                                                 "a token generated in the state dir)");
  cmd->add_option("--state-dir", o->state_dir, "Journal, logs, drained cards (overrides runner.yml state-dir)");
  cmd->add_option("--lock-dir", o->lock_dir, "Card lock directory (overrides runner.yml devices.lock-dir)");
  cmd->add_flag("--simulate", o->simulate, "Steps sleep their expected duration (the lead job still runs for real)");
  cmd->add_flag("--rebuild-journal", o->rebuild_journal,
                "Move the journal aside and rebuild the history from the run directories' run.json");
  cmd->add_option("--time-scale", o->time_scale, "With --simulate: real seconds per simulated second (a 20-minute step at 0.01 sleeps 12 s)")
      ->check(CLI::Range(1e-6, 1e6))
      ->capture_default_str();
  cmd->add_option("--log-format", *log_format, "The daemon's log on stderr: text (default) or json, one object per line")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--log-level", *log_level, "trace, debug, info (default), warn, error, critical or off");
  add_footer(*cmd, "0 after a drain; 130/143 after cancelling; 2 bad host settings (runner.yml, flags, token file) or "
                   "the state dir belongs to another daemon; 3 the host: cannot listen, use the lock directory, or "
                   "open, check or write the journal (a full disk, a damaged journal: the message names the file).", "Signals: SIGTERM drains (no new runs or leases, accepted runs go on to their end, at most "
                   "shutdown-timeout-minutes, then exit 0); SIGINT or a second SIGTERM cancels every run (exit "
                   "130/143); SIGUSR2 hands over (exit 0 at once; running steps go on under their supervisor and the "
                   "next daemon takes their runs over: a restart or an upgrade); SIGHUP reads runner.yml again.");
  cmd->callback([o, log_format, log_level, &common, &exit_code] {
    o->load = common.load;
    if (std::string e = setup_daemon_log(*log_format, *log_level); !e.empty()) {
      std::cerr << "pto-runner serve: " << e << "\n";
      exit_code = 2;
      return;
    }
    boost::asio::io_context io;
    Daemon daemon(io, *o);
    int start_exit = 0;
    if (std::string err = daemon.start(start_exit); !err.empty()) {
      std::cerr << "pto-runner serve: " << err << "\n";
      exit_code = start_exit;
      return;
    }
    // The address really bound (a wildcard shown as it is, a port of 0 resolved).
    std::cout << "pto-runner serve: listening on " << daemon.url() << " (status: " << api_path::kStatus << ")"
              << "; token file: " << daemon.token_path() << std::endl;
    int result = 0;
    auto stopped = [&io, &result](int code) {
      result = code;
      io.stop();
    };
    bool got_term = false;
    boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
    signals.add(SIGUSR2);
    std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGUSR2) {
        // A restart: nothing is stopped or cancelled. Every transition is already journaled and every running
        // step is its supervisor's, so leaving now is what a crash would leave, and the next daemon takes the
        // runs over (supervise/, hosting/run_host_adopt.cpp). Without supervisors (supervise: false) their steps
        // end with this process, as after a crash: the next daemon marks them interrupted.
        daemon.hand_over();
        spdlog::warn("SIGUSR2: handing over to the next daemon: running steps go on under their supervisor");
        spdlog::default_logger()->flush();
        std::cerr << "pto-runner serve: SIGUSR2: handed over; running steps go on under their supervisor" << std::endl;
        std::_Exit(0);
      }
      if (sig == SIGHUP) {
        daemon.reload();
      } else if (sig == SIGTERM && !got_term) {
        got_term = true;
        std::cerr << "pto-runner serve: SIGTERM: draining (accepted runs go on; SIGTERM again cancels them)\n";
        daemon.drain(stopped);
      } else {
        std::cerr << "pto-runner serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": cancelling active runs\n";
        daemon.cancel_all(sig == SIGINT ? 130 : 143, stopped);
      }
      signals.async_wait(on_signal);
    };
    signals.async_wait(on_signal);
    io.run();
    exit_code = result;
  });
}

}  // namespace pto
