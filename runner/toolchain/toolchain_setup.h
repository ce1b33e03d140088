#pragma once
// The toolchain lead job: the pinned PTOAS taken from the cache or fetched (mirror first, then the release
// URL), verified against toolchain/versions.env on every use, installed into a content-addressed directory,
// located and smoke-checked.
//
// Cache layout under <cache-dir>/ptoas/:
//   downloads/<version>/<artifact>       the archive; only ever renamed into place after its digest matched
//   <version>-<sha256[:12]>/             the install root; trusted only when .pto-runner-complete is inside
//   locks/<version>-<sha256[:12]>.lock   flock: concurrent setups of one pin take turns, the second one finds
//                                        the first one's install
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/toolchain_config.h"
#include "config/versions_env.h"
#include "exec/run_as.h"

namespace pto {

struct ToolchainRequest {
  VersionsEnv pin;
  ToolchainConfig config;
  std::string arch;       // x86_64 | aarch64
  std::string cache_dir;  // absolute
  std::string mirror;     // a directory or file:// URL holding {version}/{artifact}; may be empty
  bool allow_fetch = true;
  std::function<void(const std::string&)> log;  // progress lines for people
  /// The run's sandbox user: the smoke check (the first thing to execute what was downloaded) runs as it.
  std::optional<RunAs> smoke_as;
};

struct ToolchainState {
  bool ok = false;
  std::string error;  // names the file, digest, URL or path involved
  std::string version, sha256, archive, root, bin;
  bool cache_hit = false;
  std::string smoke_output;
  std::string verified_at;
};

/// The lead job: fetch if needed, verify, install, locate, smoke-check.
ToolchainState setup_toolchain(const ToolchainRequest& req);
/// Verify what is cached, never fetch.
ToolchainState verify_toolchain(const ToolchainRequest& req);
/// The CPython versions a wheel's file name says it runs on ("cp310" -> "3.10"); empty for a pure-Python
/// wheel (any interpreter) or a name that is not a wheel's.
std::vector<std::string> wheel_cpython_versions(const std::string& artifact);
/// PTOAS_ROOT, PTOAS_BIN, PTOAS_VERSION, PTOAS_SHA256 for dependants.
std::vector<std::pair<std::string, std::string>> toolchain_exports(const ToolchainState& s);

}  // namespace pto
