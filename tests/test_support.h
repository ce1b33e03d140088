#pragma once
// Helpers for tests: temp project trees and running the built pto-runner binary as a user would.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

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

/// A valid versions.env with the real v0.52 digests.
std::string valid_versions_env();

/// A minimal valid project: versions.env plus the given job files ({"a.yml", "..."}) and model files.
void write_project(const TempDir& dir, const std::map<std::string, std::string>& jobs,
                   const std::map<std::string, std::string>& models = {});

/// The repository's own source tree (for the shipped definitions).
fs::path source_dir();

std::string read_file(const fs::path& p);

}  // namespace pto::test
