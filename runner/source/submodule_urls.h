#pragma once
// Which submodule URLs a commit may name (SPEC "A shared host under attack": git never fetches anything on a
// commit's say-so that the run's user could not read itself). A pull request writes its own .gitmodules, and
// the daemon, as root, would clone whatever it names: a root-only repository on the host, by its path, would
// land in the run's worktree. So every URL is resolved as git would (a relative one against the source
// repository's URL) and must start with one of `source.submodule-urls` (default: the source repository's host,
// `https://github.com/` for `https://github.com/OWNER/REPO`); a local path (`/srv/x`, `./x`, `file://`) is
// refused unless an entry names its directory, and git is told to refuse local clones besides.
#include <optional>
#include <string>
#include <vector>

namespace pto {

/// The prefixes allowed when runner.yml names none: the scheme and host of `repo` (`https://host/`,
/// `ssh://host/`, `git@host:`); none for a local repository.
std::vector<std::string> default_submodule_urls(const std::string& repo);

/// `url` as git resolves it for a submodule of a superproject fetched from `base`: `./x` and `../x` relative to
/// `base`, anything else as written.
std::string resolve_submodule_url(const std::string& base, const std::string& url);

/// Whether `url` (resolved) is a path on this host rather than a remote: absolute or relative paths,
/// `file://`.
bool is_local_url(const std::string& url);

/// Why `url` (resolved) may not be fetched, or nothing when it starts with one of `allowed`.
std::optional<std::string> refused_submodule_url(const std::string& url, const std::vector<std::string>& allowed);

}  // namespace pto
