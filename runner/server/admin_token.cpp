#include "server/admin_token.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "config/project.h"
#include "server/access.h"
#include "util/random_hex.h"
#include "util/token_file.h"

namespace pto {

namespace {

/// The admin token generated on a first start: written 0600 from its creation, never readable by others.
std::string make_token_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errno == EEXIST ? "" : "cannot create the token file " + path + ": " + std::strerror(errno);
  const std::string text = random_hex(32) + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  return ok ? "" : "cannot write the token file " + path + " (disk full?)";
}

}  // namespace

std::string read_admin_token(const std::string& root, const std::string& flag, const std::string& configured, const std::string& state_dir,
                             bool generate, AdminToken& out, bool& bad_settings) {
  bad_settings = false;
  out.path = resolve_under_root(root, !flag.empty() ? flag : configured);
  if (out.path.empty()) {
    out.path = state_dir + "/token";
    if (generate)
      if (std::string e = make_token_file(out.path); !e.empty()) return e;
  }
  std::string error;
  out.token = read_private_token_file(out.path, error);
  bad_settings = !error.empty();
  return error;
}

std::string reload_admin_token(Access& access, const std::string& root, const std::string& flag, const std::string& configured,
                               const std::string& state_dir, std::string& changed) {
  AdminToken admin;
  bool bad_settings = false;
  if (std::string e = read_admin_token(root, flag, configured, state_dir, false, admin, bad_settings); !e.empty()) return e;
  changed = access.is_admin_token(admin.token) && admin.path == access.admin_token_file() ? "" : "token read again from " + admin.path;
  access.set_admin_token(admin.token, admin.path);
  return "";
}

}  // namespace pto
