#include "config/toolchain_config.h"

#include "config/yaml_map.h"

namespace pto {

std::string to_string(ArchiveKind k) {
  switch (k) {
    case ArchiveKind::TarGz: return "tar.gz";
    case ArchiveKind::Zip: return "zip";
    case ArchiveKind::Whl: return "whl";
  }
  return "?";
}

std::string expand_braces(const std::string& tmpl, const std::vector<std::pair<std::string, std::string>>& values,
                          std::vector<std::string>* unknown) {
  std::string out;
  std::size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] == '{') {
      std::size_t close = tmpl.find('}', i + 1);
      if (close != std::string::npos) {
        std::string name = tmpl.substr(i + 1, close - i - 1);
        bool is_name = !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_-0123456789") ==
                                            std::string::npos;
        if (is_name) {
          bool found = false;
          for (const auto& [k, v] : values)
            if (k == name) {
              out += v;
              found = true;
              break;
            }
          if (!found) {
            if (unknown) unknown->push_back(name);
            out += tmpl.substr(i, close - i + 1);
          }
          i = close + 1;
          continue;
        }
      }
    }
    out += tmpl[i++];
  }
  return out;
}

std::string ToolchainConfig::artifact_name(const std::string& version, const std::string& arch) const {
  std::string number = !version.empty() && version[0] == 'v' ? version.substr(1) : version;
  return expand_braces(artifact, {{"version", version}, {"version_number", number}, {"arch", arch}});
}

std::string ToolchainConfig::artifact_url(const std::string& version, const std::string& arch) const {
  std::string number = !version.empty() && version[0] == 'v' ? version.substr(1) : version;
  return expand_braces(url, {{"version", version},
                             {"version_number", number},
                             {"arch", arch},
                             {"artifact", artifact_name(version, arch)}});
}

static ToolchainConfig load_toolchain_config_unguarded(const std::string& path, const std::string& display, Diagnostics& diags) {
  ToolchainConfig cfg;
  cfg.file = display;
  auto doc = load_yaml_file(path, display, diags);
  if (!doc) return cfg;
  MapReader m(*doc, "toolchain/ptoas.yml",
              {"artifact", "url", "kind", "probe", "smoke", "max-size-mb", "max-entries", "max-compression-ratio",
               "retries", "python"},
              display,
              diags);
  if (!m.is_map()) return cfg;

  auto check_template = [&](const std::string& key, const std::string& value, bool allow_artifact) {
    std::vector<std::string> unknown;
    std::vector<std::pair<std::string, std::string>> vals = {{"version", ""}, {"version_number", ""}, {"arch", ""}};
    if (allow_artifact) vals.push_back({"artifact", ""});
    expand_braces(value, vals, &unknown);
    for (const auto& u : unknown)
      m.error_at(m.get(key), "bad-value",
                 "'" + key + "' uses unknown placeholder {" + u + "}; known: {version}, {version_number}, {arch}" +
                     (allow_artifact ? ", {artifact}" : ""));
  };
  if (auto v = m.string("artifact", true)) {
    cfg.artifact = *v;
    check_template("artifact", *v, false);
    if (v->find('/') != std::string::npos)
      m.error_at(m.get("artifact"), "bad-value", "'artifact' is a file name and must not contain '/'");
  }
  if (auto v = m.string("url", true)) {
    cfg.url = *v;
    check_template("url", *v, true);
    if (v->rfind("https://", 0) != 0 && v->rfind("http://", 0) != 0 && v->rfind("file://", 0) != 0)
      m.error_at(m.get("url"), "bad-value", "'url' must start with https://, http:// or file://, got '" + *v + "'");
  }
  if (auto v = m.string("kind")) {
    if (*v == "tar.gz") cfg.kind = ArchiveKind::TarGz;
    else if (*v == "zip") cfg.kind = ArchiveKind::Zip;
    else if (*v == "whl") cfg.kind = ArchiveKind::Whl;
    else m.error_at(m.get("kind"), "bad-value", "'kind' must be one of tar.gz, zip, whl; got '" + *v + "'");
  }
  if (auto v = m.strings("probe")) {
    if (v->empty()) m.error_at(m.get("probe"), "bad-value", "'probe' needs at least one relative path");
    for (const auto& p : *v)
      if (p.empty() || p[0] == '/' || p.find("..") != std::string::npos)
        m.error_at(m.get("probe"), "bad-value", "'probe' paths are relative to the install root, got '" + p + "'");
    cfg.probe = *v;
  }
  if (auto v = m.strings("smoke")) cfg.smoke = *v;
  if (auto v = m.integer("max-size-mb", 1, 1 << 20)) cfg.max_bytes = *v << 20;
  if (auto v = m.integer("max-entries", 1, 10000000)) cfg.max_entries = *v;
  if (auto v = m.integer("retries", 0, 20)) cfg.retries = static_cast<int>(*v);
  if (auto v = m.number("max-compression-ratio", 2, 1e6)) cfg.max_ratio = *v;
  if (auto v = m.string("python")) {
    cfg.python = *v;
    if (v->empty() || v->find_first_of(" \t\n'\"$`;&|") != std::string::npos)
      m.error_at(m.get("python"), "bad-value", "'python' names an interpreter (python3.10 or a path), got '" + *v + "'");
    if (cfg.kind != ArchiveKind::Whl)
      m.error_at(m.get("python"), "bad-value", "'python' applies to kind: whl only");
  }
  return cfg;
}

ToolchainConfig load_toolchain_config(const std::string& path, const std::string& display, Diagnostics& diags) {
  ToolchainConfig out; out.file = display;
  guard_yaml(display, diags, [&] { out = load_toolchain_config_unguarded(path, display, diags); });
  return out;
}

}  // namespace pto
