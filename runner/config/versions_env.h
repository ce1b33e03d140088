#pragma once
// toolchain/versions.env: the single source of truth for the PTOAS pin.
//
// The format is deliberately poorer than shell: `KEY=value`, no spaces, no quotes, `#` comments, so that
// `grep -E '^[A-Z0-9_]+=' toolchain/versions.env >> "$GITHUB_OUTPUT"` keeps working. Anything richer is an
// error here rather than a silent difference between what grep and pto-runner read.
#include <map>
#include <string>
#include <vector>

#include "config/diagnostics.h"

namespace pto {

struct VersionsEnv {
  std::string file;
  std::vector<std::pair<std::string, std::string>> entries;  // in file order
  std::string ptoas_version;                                 // "v0.52"
  std::map<std::string, std::string> sha256_by_arch;         // "x86_64" / "aarch64" -> 64 lowercase hex

  /// "0.52" for "v0.52".
  std::string version_number() const;
  /// Empty when the pin has no digest for `arch`.
  std::string sha256_for(const std::string& arch) const;
};

VersionsEnv parse_versions_env(const std::string& text, const std::string& display, Diagnostics& diags);
VersionsEnv load_versions_env(const std::string& path, const std::string& display, Diagnostics& diags);

bool is_sha256_hex(const std::string& s);
bool is_ptoas_version(const std::string& s);

}  // namespace pto
