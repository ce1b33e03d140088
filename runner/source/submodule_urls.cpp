#include "source/submodule_urls.h"

namespace pto {

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

/// "scheme://host" of a URL, "user@host:" of scp-like syntax; "" for a path.
std::string host_part(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme != std::string::npos) {
    if (starts_with(url, "file://")) return "";
    const auto slash = url.find('/', scheme + 3);
    return slash == std::string::npos ? url : url.substr(0, slash);
  }
  const auto colon = url.find(':');
  const auto slash = url.find('/');
  if (colon != std::string::npos && (slash == std::string::npos || colon < slash) && colon > 0) return url.substr(0, colon + 1);
  return "";
}

}  // namespace

bool is_local_url(const std::string& url) { return starts_with(url, "file://") || host_part(url).empty(); }

std::vector<std::string> default_submodule_urls(const std::string& repo) {
  const std::string host = host_part(repo);
  if (host.empty()) return {};
  return {host.back() == ':' ? host : host + "/"};
}

std::string resolve_submodule_url(const std::string& base, const std::string& url) {
  if (!starts_with(url, "./") && !starts_with(url, "../")) return url;
  // As git: the superproject's URL is a directory; each ../ goes up one component of it.
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  std::string rest = url;
  while (true) {
    if (starts_with(rest, "./")) {
      rest = rest.substr(2);
    } else if (starts_with(rest, "../")) {
      rest = rest.substr(3);
      const auto cut = b.find_last_of("/:");
      const std::string host = host_part(b);
      if (cut == std::string::npos || cut + 1 <= host.size()) return "";  // above the host: no such URL
      b.resize(cut + (b[cut] == ':' ? 1 : 0));
    } else {
      break;
    }
  }
  if (b.empty()) return rest;
  return b.back() == ':' ? b + rest : b + "/" + rest;
}

std::optional<std::string> refused_submodule_url(const std::string& url, const std::vector<std::string>& allowed) {
  if (url.empty()) return "it resolves above the source repository's host";
  if (url.find('\n') != std::string::npos || starts_with(url, "-")) return "it is not a URL";
  for (const auto& prefix : allowed)
    if (!prefix.empty() && starts_with(url, prefix)) {
      // A prefix ends at a path component: /srv/mirrors must not allow /srv/mirrors-private.
      if (prefix.back() == '/' || prefix.back() == ':' || url.size() == prefix.size() || url[prefix.size()] == '/') return std::nullopt;
    }
  if (is_local_url(url))
    return "it is a path on the daemon's host, which the daemon would read as root for a pull request (list its "
           "directory in source.submodule-urls to allow a local mirror)";
  return "it is not under source.submodule-urls";
}

}  // namespace pto
