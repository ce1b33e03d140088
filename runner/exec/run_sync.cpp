#include "exec/run_sync.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "util/process_env.h"
#include "util/random_hex.h"

namespace pto {

SyncResult run_sync(const std::vector<std::string>& argv, const std::vector<std::string>& env, double timeout_seconds,
                    const std::string& log_path, const std::optional<RunAs>& run_as) {
  boost::asio::io_context io;
  auto exec = make_local_executor(io, Spawning::InProcess);  // one command: a spawner would cost an exec more
  SyncResult r;
  StepLaunch l;
  for (const auto& a : argv) l.command += (l.command.empty() ? "" : " ") + shell_quote(a);
  l.label = argv.empty() ? "" : argv[0];
  l.env = env;
  l.log_path = log_path;
  l.marker = "sync-" + std::to_string(getpid()) + "-" + random_hex(8);
  l.timeout_seconds = timeout_seconds;
  l.grace_seconds = 5;
  l.run_as = run_as;
  if (run_as) l.working_directory = "/";
  l.on_line = [&](std::string_view line) {
    if (r.output.size() < (1 << 20)) r.output.append(line).push_back('\n');
  };
  exec->start(l, [&](const StepOutcome& o) { r.outcome = o; });
  io.run();
  return r;
}

}  // namespace pto
