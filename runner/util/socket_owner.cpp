#include "util/socket_owner.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace pto {

namespace {

// The kernel's hex form of an endpoint in /proc/net/tcp: the address as the 32-bit words in host order
// (printed with %08X each), then ":PORT" in hex.
std::string proc_form(const boost::asio::ip::tcp::endpoint& ep) {
  char buf[64];
  const auto a = ep.address();
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    std::uint32_t word;
    std::memcpy(&word, b.data(), 4);
    std::snprintf(buf, sizeof buf, "%08X:%04X", word, ep.port());
    return buf;
  }
  const auto b = a.to_v6().to_bytes();
  std::string out;
  for (int i = 0; i < 16; i += 4) {
    std::uint32_t word;
    std::memcpy(&word, b.data() + i, 4);
    std::snprintf(buf, sizeof buf, "%08X", word);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ":%04X", ep.port());
  return out + buf;
}

/// The table's scan: every socket of the host read, so it costs as much as there are connections.
TcpSocketOwner owner_from_proc(const boost::asio::ip::tcp::endpoint& self, const boost::asio::ip::tcp::endpoint& other) {
  const std::string own = proc_form(self), theirs = proc_form(other);
  std::ifstream table(self.address().is_v4() ? "/proc/net/tcp" : "/proc/net/tcp6");
  std::string line;
  std::getline(table, line);  // header
  while (std::getline(table, line)) {
    // "  sl  local_address rem_address   st tx_queue:rx_queue tr:tm->when retrnsmt   uid  timeout inode ..."
    char sl[16], loc[64], rem[64], st[8], queues[32], timer[32], retr[16];
    unsigned uid = 0, timeout = 0;
    unsigned long inode = 0;
    if (std::sscanf(line.c_str(), "%15s %63s %63s %7s %31s %31s %15s %u %u %lu", sl, loc, rem, st, queues, timer, retr, &uid, &timeout,
                    &inode) != 10)
      continue;
    if (own == loc && theirs == rem) return {static_cast<int>(uid), inode};
  }
  return {};
}

void fill(std::uint32_t* out, const boost::asio::ip::address& a) {
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    std::memcpy(out, b.data(), 4);
  } else {
    const auto b = a.to_v6().to_bytes();
    std::memcpy(out, b.data(), 16);
  }
}

/// Asks sock_diag (NETLINK_SOCK_DIAG, what `ss` uses) for TCP sockets: `each` sees every socket the kernel
/// names (false stops). False when the kernel cannot be asked; "no such socket" (ENOENT) is an answer.
bool ask_sock_diag(inet_diag_req_v2 req, bool dump, const std::function<bool(const inet_diag_msg&)>& each) {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return false;
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | (dump ? NLM_F_DUMP : 0);
  msg.req = req;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  bool answered = false, done = false;
  if (::sendto(fd, &msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) == static_cast<ssize_t>(sizeof(msg))) {
    alignas(nlmsghdr) char buf[32768];
    while (!done) {
      const ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
      if (got <= 0) break;
      answered = true;
      int left = static_cast<int>(got);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left) && !done; h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
          // ENOENT: no such socket (gone). Anything else: the kernel cannot answer; read the table instead.
          answered = static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error == -ENOENT;
          done = true;
        } else if (h->nlmsg_type == NLMSG_DONE) {
          done = true;
        } else if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
          done = !each(*static_cast<const inet_diag_msg*>(NLMSG_DATA(h))) || !dump;
        }
      }
    }
  }
  ::close(fd);
  return answered;
}

/// One exact lookup: the socket by its four-tuple, answered from the kernel's hash of sockets. False when the
/// kernel cannot be asked (then `out` is unset).
bool owner_from_sock_diag(const boost::asio::ip::tcp::endpoint& self, const boost::asio::ip::tcp::endpoint& other, TcpSocketOwner& out) {
  inet_diag_req_v2 req{};
  req.sdiag_family = self.address().is_v4() ? AF_INET : AF_INET6;
  req.idiag_states = ~0U;
  // The socket's source is its own end, its destination the other.
  req.id.idiag_sport = htons(self.port());
  req.id.idiag_dport = htons(other.port());
  fill(req.id.idiag_src, self.address());
  fill(req.id.idiag_dst, other.address());
  req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  return ask_sock_diag(req, false, [&](const inet_diag_msg& m) {
    out = {static_cast<int>(m.idiag_uid), static_cast<unsigned long>(m.idiag_inode)};
    return false;
  });
}

/// Whether a listener bound to `bound` takes connections to `to` (the same port; the same address, a wildcard,
/// or the IPv4-mapped form of it).
bool takes(const boost::asio::ip::tcp::endpoint& bound, const boost::asio::ip::tcp::endpoint& to) {
  if (bound.port() != to.port()) return false;
  const auto b = bound.address();
  if (b.is_unspecified() || b == to.address()) return true;
  return b.is_v6() && b.to_v6().is_v4_mapped() && to.address().is_v4() &&
         b.to_v6().to_v4() == to.address().to_v4();  // deprecated in later Boosts as make_address_v4(v4_mapped, ...)
}

boost::asio::ip::tcp::endpoint endpoint_of(int family, const std::uint32_t* addr, std::uint16_t port_be) {
  if (family == AF_INET) {
    boost::asio::ip::address_v4::bytes_type b;
    std::memcpy(b.data(), addr, 4);
    return {boost::asio::ip::address_v4(b), ntohs(port_be)};
  }
  boost::asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), addr, 16);
  return {boost::asio::ip::address_v6(b), ntohs(port_be)};
}

/// Every listening socket of `family` through sock_diag (a dump): false when the kernel cannot be asked.
bool listeners_from_sock_diag(int family, const boost::asio::ip::tcp::endpoint& to, std::vector<int>& uids) {
  inet_diag_req_v2 req{};
  req.sdiag_family = static_cast<std::uint8_t>(family);
  req.idiag_states = 1U << 10;  // TCP_LISTEN
  return ask_sock_diag(req, true, [&](const inet_diag_msg& m) {
    if (takes(endpoint_of(m.idiag_family, m.id.idiag_src, m.id.idiag_sport), to)) uids.push_back(static_cast<int>(m.idiag_uid));
    return true;
  });
}

void listeners_from_proc(const char* table_path, bool v4, const boost::asio::ip::tcp::endpoint& to, std::vector<int>& uids) {
  std::ifstream table(table_path);
  std::string line;
  std::getline(table, line);  // header
  while (std::getline(table, line)) {
    char sl[16], loc[64], rem[64], st[8];
    unsigned uid = 0;
    char rest[128];
    if (std::sscanf(line.c_str(), "%15s %63s %63s %7s %127s %127s %127s %u", sl, loc, rem, st, rest, rest, rest, &uid) != 8) continue;
    if (std::string(st) != "0A") continue;  // TCP_LISTEN
    const std::string l = loc;
    const auto colon = l.find(':');
    if (colon == std::string::npos) continue;
    std::uint32_t words[4] = {0, 0, 0, 0};
    for (int i = 0; i < (v4 ? 1 : 4); ++i) words[i] = static_cast<std::uint32_t>(std::stoul(l.substr(static_cast<std::size_t>(i) * 8, 8), nullptr, 16));
    const auto port = static_cast<std::uint16_t>(htons(static_cast<std::uint16_t>(std::stoul(l.substr(colon + 1), nullptr, 16))));
    if (takes(endpoint_of(v4 ? AF_INET : AF_INET6, words, port), to)) uids.push_back(static_cast<int>(uid));
  }
}

}  // namespace

std::vector<int> tcp_listener_uids(const boost::asio::ip::tcp::endpoint& to) {
  std::vector<int> uids;
  for (int family : {AF_INET, AF_INET6}) {
    std::vector<int> found;
    if (listeners_from_sock_diag(family, to, found)) uids.insert(uids.end(), found.begin(), found.end());
    else listeners_from_proc(family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", family == AF_INET, to, uids);
  }
  return uids;
}

TcpSocketOwner tcp_socket_owner(const boost::asio::ip::tcp::endpoint& self, const boost::asio::ip::tcp::endpoint& other) {
  // The kernel's own lookup costs one round trip whatever the number of connections; the table's scan (where
  // sock_diag is not available) reads every one of them.
  TcpSocketOwner o;
  if (owner_from_sock_diag(self, other, o)) return o;
  return owner_from_proc(self, other);
}

int loopback_peer_uid(const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote) {
  if (!remote.address().is_loopback()) return -1;
  return tcp_socket_owner(remote, local).uid;
}

}  // namespace pto
