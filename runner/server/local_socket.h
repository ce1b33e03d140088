#pragma once
// runner.yml `listen-unix: PATH` with `submit-group: GROUP` (SPEC "Who may do what through the API"): the API
// on a Unix socket as well, mode 0660 root:GROUP (0600 without a group: root only), whose callers the kernel
// names (SO_PEERCRED). A member of the group is a local submitter (server/access): the GitHub Actions runner's
// user submits a fork's pull request with no secret at all. No sandbox user may be in the group (a step
// could then submit runs): checked here at start, and refused by Access on every request after.
#include <string>

#include "config/runner_config.h"
#include "server/inherited_listeners.h"

namespace pto {

class Access;
class HttpServer;

/// Listens on cfg.listen_unix and tells `access` who the local submitters are. "" or the problem, a
/// configuration error (serve exits 2): no such group, a sandbox user in it, a path it cannot bind.
/// `given`: the socket already listening there (systemd's, or kept across a restart), used instead.
std::string open_local_socket(HttpServer& server, Access& access, const RunnerConfig& cfg, const GivenListener& given = {});

}  // namespace pto
