#pragma once
// The daemon's admin token (docs/security.md, "Tokens"): --token-file, else runner.yml's `token-file` (under the
// root), else `<state-dir>/token`, generated 0600 at the first start. Read at start and again at SIGHUP (a
// rotated token takes effect then); one rule for both.
#include <string>

namespace pto {

struct AdminToken {
  std::string path, token;
};

/// The token, or "" with why not: `bad_settings` when the file is runner.yml's fault (unreadable, readable by
/// others, too short), else the disk's (the generated one cannot be written). `generate`: the state dir's file is
/// made when missing (at start; a reload reads what is there).
std::string read_admin_token(const std::string& root, const std::string& flag, const std::string& configured, const std::string& state_dir,
                             bool generate, AdminToken& out, bool& bad_settings);

class Access;

/// SIGHUP: the token read again by the same rule into `access` (a rotated token takes effect now). "" or why
/// not (the old token kept); `changed` names what changed ("" when nothing did).
std::string reload_admin_token(Access& access, const std::string& root, const std::string& flag, const std::string& configured,
                               const std::string& state_dir, std::string& changed);

}  // namespace pto
