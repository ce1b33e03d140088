#pragma once
// Which user a loopback TCP client runs as, asked of the kernel (sock_diag, as `ss` does; else /proc/net/tcp), as
// identd did: the client's end of the connection is listed there with its owner's uid. Every local user
// connects from 127.0.0.1, so a cap on one client's connections counts users, not that shared address.
#include <boost/asio/ip/tcp.hpp>

namespace pto {

/// The uid owning the client end `remote` of a connection to `local`, or -1 when it is not found (not a local
/// client, or gone).
int loopback_peer_uid(const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote);

}  // namespace pto
