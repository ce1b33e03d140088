#pragma once
// Typed, located reading of YAML mappings.
//
// Every loader reads its maps through MapReader so that unknown keys (with the nearest known key suggested),
// duplicated keys, wrong types and missing keys are reported the same way everywhere, at the key's or value's
// FILE:LINE:COL, without throwing: one bad key never hides the next.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/diagnostics.h"

namespace pto {

struct SourceLoc {
  int line = 0;  // 1-based, 0 = unknown
  int col = 0;
};

SourceLoc loc_of(const YAML::Node& node);

/// Files larger than this are refused before parsing: a definition file is a few KiB; a 1,400-line workflow is
/// under 100 KiB.
constexpr std::size_t kMaxYamlBytes = 4 * 1024 * 1024;

/// Reads and parses a YAML file. On failure reports `unreadable` or `yaml-syntax` and returns nothing.
std::optional<YAML::Node> load_yaml_file(const std::filesystem::path& path, const std::string& display,
                                         Diagnostics& diags);
std::optional<YAML::Node> parse_yaml_text(const std::string& text, const std::string& display, Diagnostics& diags);

/// The candidate closest to `word` by edit distance, or "" when none is close enough to be a likely typo.
std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates);

/// A short human description of a node's type and value, for "expected X, got Y" messages.
std::string describe_node(const YAML::Node& node);

/// `node[key]` that is safe on any node: yaml-cpp's const operator[] returns an *invalid* node for a missing
/// key, on which IsMap()/IsScalar() throw. This returns an Undefined node instead (and for non-maps).
YAML::Node child(const YAML::Node& node, const std::string& key);

/// Runs a loader body; any yaml-cpp exception it still throws (an unexpected shape) becomes a located error
/// instead of terminating the process.
template <typename F>
void guard_yaml(const std::string& file, Diagnostics& diags, F&& body) {
  try {
    body();
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    int col = e.mark.is_null() ? 0 : e.mark.column + 1;
    diags.error(file, line, col, "wrong-type", "unexpected structure: " + e.msg);
  }
}

/// True when a scalar holds a `${{ ... }}` expression, which is resolved after matrix expansion.
bool is_expression(const std::string& text);

class MapReader {
 public:
  /// `what` names the map in messages ("step", "job", "strategy"). Reports a non-map node, duplicated keys and
  /// every key not in `allowed`.
  MapReader(const YAML::Node& node, std::string what, std::vector<std::string> allowed, const std::string& file,
            Diagnostics& diags);

  bool is_map() const { return is_map_; }
  bool has(const std::string& key) const;
  YAML::Node get(const std::string& key) const;

  std::optional<std::string> string(const std::string& key, bool required = false);
  std::optional<bool> boolean(const std::string& key);
  /// A plain number within [min, max]; decimals allowed (timeouts take `0.05`).
  std::optional<double> number(const std::string& key, double min, double max);
  std::optional<long long> integer(const std::string& key, long long min, long long max);
  /// A size in bytes: 64G, 512M, 1073741824 (an optional K/M/G/T suffix, powers of 1024, as systemd's
  /// MemoryMax=; KiB/MiB/GiB/TiB too); at least `min` bytes.
  std::optional<std::uint64_t> size(const std::string& key, std::uint64_t min = 1);
  /// A list of scalars; with `allow_scalar` a single scalar is read as a one-element list (GHA `needs: a`).
  std::optional<std::vector<std::string>> strings(const std::string& key, bool allow_scalar = false);
  /// A map of scalars to scalars, such as `env`.
  std::optional<std::map<std::string, std::string>> scalar_map(const std::string& key);

  void error_at(const YAML::Node& node, const std::string& rule, const std::string& message);
  const std::string& file() const { return file_; }
  Diagnostics& diags() { return diags_; }
  const std::string& what() const { return what_; }

 private:
  YAML::Node node_;
  std::map<std::string, YAML::Node> entries_;  // first occurrence of each key, indexed once
  std::string what_;
  std::string file_;
  Diagnostics& diags_;
  bool is_map_ = false;
};

}  // namespace pto
