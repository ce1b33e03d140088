#pragma once
// toolchain/ptoas.yml: where the pinned PTOAS comes from and how to find its executable once installed.
//
// PTOAS has changed its release layout several times; everything that changed (artifact name, archive kind,
// launcher path) is a key here so the next change is a one-line edit, not a code change.
#include <string>
#include <vector>

#include "config/diagnostics.h"

namespace pto {

enum class ArchiveKind { TarGz, Zip, Whl };
std::string to_string(ArchiveKind k);

struct ToolchainConfig {
  std::string file;
  std::string artifact = "ptoas-bin-{arch}.tar.gz";
  std::string url = "https://github.com/hw-native-sys/PTOAS/releases/download/{version}/{artifact}";
  ArchiveKind kind = ArchiveKind::TarGz;
  std::vector<std::string> probe = {"ptoas", "ptoas.sh", "bin/ptoas"};
  std::vector<std::string> smoke = {"--version"};
  long long max_bytes = 4LL << 30;  // extracted size cap
  long long max_entries = 200000;
  double max_ratio = 100;  // extracted bytes per archive byte
  int retries = 3;
  /// whl only: the interpreter whose venv gets the wheel; its version must match the wheel's Python tag.
  std::string python = "python3";

  /// Expands {version}, {version_number}, {arch} (and {artifact} in the URL).
  std::string artifact_name(const std::string& version, const std::string& arch) const;
  std::string artifact_url(const std::string& version, const std::string& arch) const;
};

ToolchainConfig load_toolchain_config(const std::string& path, const std::string& display, Diagnostics& diags);

/// Replaces `{name}` placeholders; returns the names that had no value in `unknown` (left as written).
std::string expand_braces(const std::string& tmpl, const std::vector<std::pair<std::string, std::string>>& values,
                          std::vector<std::string>* unknown = nullptr);

}  // namespace pto
