#pragma once
// Helpers for tests: temp project trees and running the built pto-runner binary as a user would.
#include <filesystem>
#include <functional>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "util/api_paths.h"

// The API's paths as the daemon routes them (tests spell none of their own).
namespace api_path = pto::api_path;

namespace pto::test {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  /// Writes `content` to path()/rel, creating directories; returns the full path.
  fs::path write(const std::string& rel, const std::string& content) const;
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// Runs the built pto-runner with `args` (no shell), capturing stdout and stderr; `env` is added.
CommandResult run_cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});

/// A pto-runner started in the background (for signal tests).
struct Spawned {
  int pid = -1;
  fs::path out, err;
  std::shared_ptr<TempDir> io;
};
Spawned spawn_cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});
CommandResult wait_cli(Spawned& s);
/// Waits until `pred` holds, polling every 20 ms, for at most `seconds`. Returns whether it held.
bool wait_until(const std::function<bool()>& pred, double seconds = 20);

/// A valid versions.env with the real v0.52 digests.
std::string valid_versions_env();

/// A minimal valid project: versions.env plus the given job files ({"a.yml", "..."}) and model files.
void write_project(const TempDir& dir, const std::map<std::string, std::string>& jobs,
                   const std::map<std::string, std::string>& models = {});

/// The repository's own source tree (for the shipped definitions).
fs::path source_dir();

std::string read_file(const fs::path& p);

/// Whether `tool` is on PATH (a test that needs it says SKIPPED without it).
bool have(const char* tool);

/// Debian's pytest (python3-pytest), as steps under test call it; the `python3` on PATH may be another one.
inline constexpr const char* kPytest = "/usr/bin/python3 -m pytest -q -p no:cacheprovider";
bool have_pytest();

/// A program other than pto-runner running in the background for a test (a local HTTP receiver, Prometheus):
/// its output in `log`, SIGTERM then SIGKILL to its process group when it goes out of scope.
struct Background {
  int pid = -1;
  fs::path log;
  Background() = default;
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  Background(Background&& o) noexcept : pid(o.pid), log(std::move(o.log)) { o.pid = -1; }
  Background& operator=(Background&& o) noexcept;
  ~Background() { stop(); }
  void stop();
};
/// Starts `argv` (argv[0] a path) in its own process group, its stdout and stderr into `log`.
Background start_background(const std::vector<std::string>& argv, const fs::path& log);

/// A loopback TCP port free a moment ago (for a program that takes its port on the command line).
int free_tcp_port();

/// Runs `cmd` with /bin/sh; returns its exit status, and its stdout in `out` when given.
int sh(const std::string& cmd, std::string* out = nullptr);

/// Whether `pid` is alive (a zombie counts as gone).
bool pid_running(int pid);

/// Waits until a step or a leased command has written the file (its pid, what it saw): exists and not empty.
bool wait_for_content(const fs::path& p, double seconds = 20);

/// Card ids of a TASK_DEVICE value ("3", "2,3").
std::vector<int> ids_of(const std::string& list);

}  // namespace pto::test
