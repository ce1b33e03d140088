#include "server/loopback_peer.h"

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
#include <string>

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
int uid_from_proc(const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote) {
  const std::string client = proc_form(remote), server = proc_form(local);
  std::ifstream table(remote.address().is_v4() ? "/proc/net/tcp" : "/proc/net/tcp6");
  std::string line;
  std::getline(table, line);  // header
  while (std::getline(table, line)) {
    // "  sl  local_address rem_address   st tx_queue:rx_queue tr:tm->when retrnsmt   uid ..."
    char sl[16], loc[64], rem[64], st[8], queues[32], timer[32], retr[16];
    unsigned uid = 0;
    if (std::sscanf(line.c_str(), "%15s %63s %63s %7s %31s %31s %15s %u", sl, loc, rem, st, queues, timer, retr, &uid) != 8) continue;
    if (client == loc && server == rem) return static_cast<int>(uid);
  }
  return -1;
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

/// One exact lookup through sock_diag (NETLINK_SOCK_DIAG, what `ss` uses): the client end of the connection
/// by its four-tuple, answered from the kernel's hash of sockets. -2 when the kernel cannot be asked.
int uid_from_sock_diag(const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote) {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return -2;
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = remote.address().is_v4() ? AF_INET : AF_INET6;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0U;
  // The client's socket: its source is the client's end, its destination the server's.
  msg.req.id.idiag_sport = htons(remote.port());
  msg.req.id.idiag_dport = htons(local.port());
  fill(msg.req.id.idiag_src, remote.address());
  fill(msg.req.id.idiag_dst, local.address());
  msg.req.id.idiag_if = 0;
  msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  int uid = -2;
  if (::sendto(fd, &msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) == static_cast<ssize_t>(sizeof(msg))) {
    alignas(nlmsghdr) char buf[8192];
    ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
    int left = got > 0 ? static_cast<int>(got) : 0;
    uid = got > 0 ? -1 : -2;
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_ERROR) {
        // ENOENT: no such socket (gone). Anything else: the kernel cannot answer; read the table instead.
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        uid = e->error == -ENOENT ? -1 : -2;
        break;
      }
      if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
        uid = static_cast<int>(static_cast<const inet_diag_msg*>(NLMSG_DATA(h))->idiag_uid);
        break;
      }
      if (h->nlmsg_type == NLMSG_DONE) break;
    }
  }
  ::close(fd);
  return uid;
}

}  // namespace

int loopback_peer_uid(const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote) {
  if (!remote.address().is_loopback()) return -1;
  // The kernel's own lookup costs one round trip whatever the number of connections; the table's scan (where
  // sock_diag is not available) reads every one of them.
  const int uid = uid_from_sock_diag(local, remote);
  return uid == -2 ? uid_from_proc(local, remote) : uid;
}

}  // namespace pto
