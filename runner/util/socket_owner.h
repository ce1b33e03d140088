#pragma once
// Who owns a local TCP socket, asked of the kernel (sock_diag, as `ss -e` does; else /proc/net/tcp), as identd
// did. Both ends of a loopback connection are listed there with their owner's uid:
// - the daemon asks for the client's end: every local user connects from 127.0.0.1, so a cap on one client's
//   connections counts users, not that shared address (server/http_server);
// - a client asks for the server's end before it sends a token (client/listener_check): the end of its own
//   connection that a listener accepted tells whose listener took it.
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace pto {

/// A TCP socket as the kernel lists it. `inode` is 0 for the server's end of a connection that is still in its
/// listener's queue (not accepted yet); `uid` is then the listener's owner (kernels from 6.x) or 0 (older ones,
/// which report root for a socket no process holds yet).
struct TcpSocketOwner {
  int uid = -1;  // -1: no such socket
  unsigned long inode = 0;
};

/// The socket whose own end is `self` and whose other end is `other`. uid -1 when it is not there (gone).
TcpSocketOwner tcp_socket_owner(const boost::asio::ip::tcp::endpoint& self, const boost::asio::ip::tcp::endpoint& other);

/// The owners of every listening socket that takes connections to `to` (its port, on its address or a
/// wildcard, in either family).
std::vector<int> tcp_listener_uids(const boost::asio::ip::tcp::endpoint& to);

/// The uid owning the client end `remote` of a connection to `local`, or -1 when it is not found (not a local
/// client, or gone).
int loopback_peer_uid(const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote);

}  // namespace pto
