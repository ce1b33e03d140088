#include "server/inherited_listeners.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <boost/asio/ip/address.hpp>

namespace pto {

namespace {

constexpr int kFirstSystemdFd = 3;  // SD_LISTEN_FDS_START

bool listening_stream(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return false;
  len = sizeof listening;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening;
}

struct Bound {
  int family = 0;
  std::string address;  // numeric, or the Unix path
  unsigned short port = 0;
};

Bound bound_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  Bound b;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return b;
  b.family = a.ss_family;
  char text[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    b.address = text;
    b.port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    b.address = text;
    b.port = ntohs(in6.sin6_port);
  } else if (a.ss_family == AF_UNIX) {
    b.address = reinterpret_cast<const sockaddr_un&>(a).sun_path;
  }
  return b;
}

/// The same address, however it was written ("::1" and "0:0::1").
bool same_address(const std::string& a, const std::string& b) {
  boost::system::error_code e1, e2;
  const auto x = boost::asio::ip::make_address(a, e1), y = boost::asio::ip::make_address(b, e2);
  return !e1 && !e2 && x == y;
}

}  // namespace

std::string listener_address(int fd) {
  const Bound b = bound_of(fd);
  if (b.family == AF_UNIX) return "unix:" + b.address;
  if (b.family == AF_INET) return b.address + ":" + std::to_string(b.port);
  if (b.family == AF_INET6) return "[" + b.address + "]:" + std::to_string(b.port);
  return "";
}

InheritedListeners::~InheritedListeners() { close_rest(); }

void InheritedListeners::take_from_systemd(std::vector<std::string>& problems) {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  if (!pid || !fds || std::atol(pid) != static_cast<long>(::getpid())) return;
  const int n = std::atoi(fds);
  std::vector<std::string> names;
  if (const char* given = std::getenv("LISTEN_FDNAMES")) {
    std::istringstream in(given);
    for (std::string name; std::getline(in, name, ':');) names.push_back(name);
  }
  for (int i = 0; i < n; ++i) {
    const int fd = kFirstSystemdFd + i;
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // no child of the daemon (the supervisor, a step) keeps a copy
    const std::string name = i < static_cast<int>(names.size()) ? names[static_cast<std::size_t>(i)] : "";
    if (!listening_stream(fd)) {
      problems.push_back("descriptor " + std::to_string(fd) + (name.empty() ? "" : " (" + name + ")") +
                         " from systemd is not a listening stream socket (ListenStream= in the socket unit): closed");
      ::close(fd);
      continue;
    }
    given_.push_back({fd, name, true});
  }
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
}

void InheritedListeners::add(GivenListener l) {
  if (l.fd < 0) return;
  // The supervisor's copy of a socket systemd gave too (under systemd both keep it): one of them is enough.
  struct stat st {};
  const bool known = ::fstat(l.fd, &st) == 0 && std::any_of(given_.begin(), given_.end(), [&](const GivenListener& g) {
    struct stat other {};
    return ::fstat(g.fd, &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino;
  });
  if (known || !listening_stream(l.fd)) {
    ::close(l.fd);
    return;
  }
  given_.push_back(std::move(l));
}

int InheritedListeners::take_tcp(const std::string& address, unsigned short port, const std::string& name) {
  for (auto it = given_.begin(); it != given_.end(); ++it) {
    const Bound b = bound_of(it->fd);
    if (b.family != AF_INET && b.family != AF_INET6) continue;
    if (!same_address(b.address, address)) continue;
    if (port != 0 ? b.port != port : it->name != name) continue;
    const int fd = it->fd;
    given_.erase(it);
    return fd;
  }
  return -1;
}

GivenListener InheritedListeners::take_unix(const std::string& path) {
  for (auto it = given_.begin(); it != given_.end(); ++it) {
    const Bound b = bound_of(it->fd);
    struct stat st {};
    // Its file gone (removed by hand), no client can reach it any more: bound again instead.
    if (b.family != AF_UNIX || b.address != path || ::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    GivenListener l = *it;
    given_.erase(it);
    return l;
  }
  return {};
}

std::vector<std::string> InheritedListeners::close_rest() {
  std::vector<std::string> out;
  for (auto& l : given_) {
    out.push_back(listener_address(l.fd) + (l.name.empty() ? "" : " (" + l.name + ")"));
    ::close(l.fd);
  }
  given_.clear();
  return out;
}

}  // namespace pto
