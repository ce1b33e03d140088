#include "client/listener_check.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "util/socket_owner.h"
#include "util/clock.h"

namespace pto {

namespace {

using tcp = boost::asio::ip::tcp;

bool trusted(int uid) { return uid == 0 || uid == static_cast<int>(::geteuid()); }

std::string user_of(int uid) {
  passwd pw{}, *found = nullptr;
  char buf[1024];
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof buf, &found) == 0 && found) return std::string(" (") + found->pw_name + ")";
  return "";
}

std::string refused(const std::string& where, int uid) {
  return std::string(kListenerRefused) + where + ": it is served by uid " + std::to_string(uid) + user_of(uid) +
         ", not by root or uid " + std::to_string(::geteuid()) + user_of(static_cast<int>(::geteuid())) +
         " (something else holds the daemon's address); nothing was sent";
}

tcp::endpoint endpoint_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    return {boost::asio::ip::address_v4(ntohl(in.sin_addr.s_addr)), ntohs(in.sin_port)};
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
  boost::asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), in6.sin6_addr.s6_addr, 16);
  return {boost::asio::ip::address_v6(b, in6.sin6_scope_id), ntohs(in6.sin6_port)};
}

std::string check_unix(int fd, const sockaddr_storage& peer) {
  ucred cred{};
  socklen_t len = sizeof cred;
  const std::string path = reinterpret_cast<const sockaddr_un&>(peer).sun_path;
  const std::string where = "unix:" + path;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::string(kListenerRefused) + where + ": cannot tell who serves it";
  if (!trusted(static_cast<int>(cred.uid))) return refused(where, static_cast<int>(cred.uid));
  // The path stays that listener's: its file is a trusted user's, in a directory no one else may change (or a
  // sticky one), so nobody else can put a socket of theirs there in its place.
  struct stat file {}, dir {};
  const std::string parent = path.find('/') == std::string::npos ? "." : path.substr(0, std::max<std::size_t>(1, path.rfind('/')));
  if (::lstat(path.c_str(), &file) != 0 || !S_ISSOCK(file.st_mode) || ::stat(parent.c_str(), &dir) != 0)
    return std::string(kListenerRefused) + where + ": its socket file is gone";
  if (!trusted(static_cast<int>(file.st_uid))) return refused(where, static_cast<int>(file.st_uid));
  const bool others_may_write = !trusted(static_cast<int>(dir.st_uid)) || (dir.st_mode & 0022) != 0;
  if (others_may_write && !(dir.st_mode & S_ISVTX))
    return std::string(kListenerRefused) + where + ": its directory " + parent + " may be changed by others (uid " +
           std::to_string(dir.st_uid) + ", mode " + std::to_string((dir.st_mode >> 6) & 7) + std::to_string((dir.st_mode >> 3) & 7) +
           std::to_string(dir.st_mode & 7) + "), so its socket is not known to stay the daemon's; nothing was sent";
  return "";
}

/// Until a process accepts the connection: who it is says whose the connection is.
std::string wait_for_accept(const tcp::endpoint& server, const tcp::endpoint& self, const std::string& where, double wait_seconds) {
  const auto until = steady_now() + std::chrono::duration<double>(wait_seconds);
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    const TcpSocketOwner end = tcp_socket_owner(server, self);
    if (end.uid < 0) return "the connection to " + where + " closed before its server could be checked";
    if (!trusted(end.uid)) return refused(where, end.uid);
    if (end.inode != 0) return "";
    if (steady_now() >= until)
      return "nothing accepted the connection to " + where + " within " + std::to_string(static_cast<int>(wait_seconds)) + " s";
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(50000));
  }
}

}  // namespace

std::string check_listener(int fd, double wait_seconds, bool must_be_accepted) {
  sockaddr_storage own{}, peer{};
  socklen_t own_len = sizeof own, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&own), &own_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
    return "the connection closed before its server could be checked";
  if (peer.ss_family == AF_UNIX) return check_unix(fd, peer);
  if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) return "";
  const tcp::endpoint self = endpoint_of(own), server = endpoint_of(peer);
  const std::string where = server.address().to_string() + ":" + std::to_string(server.port());
  // The server's end of this connection: whose listener took it, and whether a process has accepted it. Not
  // found: another host's (TLS names the server there), unless it was loopback and is gone.
  TcpSocketOwner end = tcp_socket_owner(server, self);
  if (end.uid < 0) return server.address().is_loopback() ? "the connection to " + where + " closed before its server could be checked" : "";
  if (!trusted(end.uid)) return refused(where, end.uid);
  if (end.inode != 0) return "";
  if (must_be_accepted) return wait_for_accept(server, self, where, wait_seconds);
  // Still in a listener's queue, where older kernels say root whoever listens. A queued connection belongs to
  // a listener that has existed since it connected (closing a listener resets its queue): when every listener
  // that takes this address is root's or ours, and the connection is still queued or accepted by one of ours
  // after that look, it is ours too. No wait for the daemon's accept on the way of every request.
  const std::vector<int> listeners = tcp_listener_uids(server);
  for (int uid : listeners)
    if (!trusted(uid)) return refused(where, uid);
  if (!listeners.empty()) {
    end = tcp_socket_owner(server, self);
    if (end.uid < 0) return "the connection to " + where + " closed before its server could be checked";
    return trusted(end.uid) ? "" : refused(where, end.uid);
  }
  // No listener: it was accepted and the listener closed since. Who accepted it says whose it is.
  return wait_for_accept(server, self, where, wait_seconds);
}

}  // namespace pto
