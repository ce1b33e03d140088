#include "server/local_socket.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <vector>

#include "server/access.h"
#include "server/http_server.h"

namespace pto {

namespace {

// The uids of every sandbox user that exists (sandbox.users + 0..count-1), whether or not the pool is active.
std::set<uid_t> sandbox_uids(const SandboxConfig& sandbox, std::vector<std::pair<std::string, std::vector<gid_t>>>& members) {
  std::set<uid_t> out;
  for (int i = 0; i < sandbox.count; ++i) {
    const std::string name = sandbox.user(i);
    passwd* pw = ::getpwnam(name.c_str());
    if (!pw) continue;
    out.insert(pw->pw_uid);
    int n = 64;
    std::vector<gid_t> groups(64);
    if (::getgrouplist(name.c_str(), pw->pw_gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<std::size_t>(n));
      ::getgrouplist(name.c_str(), pw->pw_gid, groups.data(), &n);
    }
    groups.resize(static_cast<std::size_t>(std::max(0, n)));
    members.push_back({name, groups});
  }
  return out;
}

}  // namespace

std::string open_local_socket(HttpServer& server, Access& access, const RunnerConfig& cfg, const GivenListener& given) {
  const int given_fd = given.fd;
  const std::string& path = cfg.listen_unix;
  long gid = -1;
  if (!cfg.submit_group.empty()) {
    std::string problem;
    group* g = ::getgrnam(cfg.submit_group.c_str());
    if (!g) problem = "submit-group: no group '" + cfg.submit_group + "' on this host (groupadd it, and add the Actions runner's user)";
    gid = g ? static_cast<long>(g->gr_gid) : -1;
    std::vector<std::pair<std::string, std::vector<gid_t>>> members;
    std::set<uid_t> never = sandbox_uids(cfg.sandbox, members);
    for (const auto& [name, groups] : members)
      for (gid_t x : groups)
        if (g && problem.empty() && static_cast<long>(x) == gid)
          problem = "submit-group: sandbox user " + name + " is in group " + cfg.submit_group +
                    ": a pull request's step could submit runs (gpasswd -d " + name + " " + cfg.submit_group + ")";
    if (!problem.empty()) {
      if (given_fd >= 0) ::close(given_fd);
      return problem;
    }
    access.set_local_submitters(static_cast<gid_t>(gid), std::move(never));
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (std::string e = server.listen_unix(path, gid >= 0 ? 0660 : 0600, given_fd, given.from_systemd); !e.empty()) return "listen-unix: " + e;
  if (gid >= 0 && ::chown(path.c_str(), 0, static_cast<gid_t>(gid)) != 0)
    return "listen-unix: cannot give " + path + " to group " + cfg.submit_group + " (chown needs root)";
  return "";
}

}  // namespace pto
