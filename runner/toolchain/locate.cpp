#include "toolchain/locate.h"

#include <sys/stat.h>

#include <filesystem>

#include "exec/run_sync.h"
#include "util/process_env.h"

namespace fs = std::filesystem;

namespace pto {

LocateResult locate_executable(const std::string& root, const std::vector<std::string>& probe) {
  LocateResult r;
  for (const auto& rel : probe) {
    fs::path p = fs::path(root) / rel;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      r.tried.push_back(p.string() + " (missing)");
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      r.tried.push_back(p.string() + " (a directory)");
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      r.tried.push_back(p.string() + " (not a regular file)");
      continue;
    }
    if (!(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
      r.tried.push_back(p.string() + " (not executable)");
      continue;
    }
    r.ok = true;
    r.bin = p.string();
    return r;
  }
  r.error = "no PTOAS executable in " + root + "; tried:";
  for (const auto& t : r.tried) r.error += "\n  " + t;
  return r;
}

SmokeResult smoke_check(const std::string& bin, const std::vector<std::string>& args,
                        const std::string& version_number, const std::string& log_path, const std::optional<RunAs>& run_as) {
  SmokeResult r;
  std::vector<std::string> argv = {bin};
  argv.insert(argv.end(), args.begin(), args.end());
  // The binary is the one the pin (the commit's versions.env) names: under a daemon it runs as the run's user.
  SyncResult s = run_sync(argv, environment_list(), 120, log_path, run_as);
  r.output = s.output;
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (!s.outcome.ok()) {
    r.error = "smoke check `" + cmd + "` failed (" +
              (s.outcome.timed_out ? std::string("timed out")
               : s.outcome.signal ? "signal " + std::to_string(s.outcome.signal)
                                  : "exit " + std::to_string(s.outcome.exit_code)) +
              "): " + s.output.substr(0, 2000);
    return r;
  }
  if (!version_number.empty() && s.output.find(version_number) == std::string::npos) {
    r.error = "smoke check `" + cmd + "` printed '" + s.output.substr(0, 200) + "', not version " + version_number;
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace pto
