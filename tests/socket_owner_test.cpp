// loopback_peer_uid (util/socket_owner): the uid of a loopback TCP client, from the kernel, for the per-user
// connection cap: this process's own connection is its uid, a child's that dropped to nobody is nobody's.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include "util/socket_owner.h"

namespace asio = boost::asio;
using asio::ip::tcp;

TEST_CASE("loopback peer: the kernel names the uid of each local client of a loopback listener", "[api]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const unsigned short port = acceptor.local_endpoint().port();

  tcp::socket mine(io);
  mine.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  tcp::socket accepted = acceptor.accept();
  CHECK(pto::loopback_peer_uid(accepted.local_endpoint(), accepted.remote_endpoint()) == static_cast<int>(::geteuid()));
  if (::geteuid() != 0) {
    WARN("SKIPPED: a second user's connection needs root");
    return;
  }
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(2);
    asio::io_context cio;
    tcp::socket s(cio);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    (void)!::write(ready[1], "x", 1);
    ::pause();
    _exit(0);
  }
  char x;
  REQUIRE(::read(ready[0], &x, 1) == 1);
  tcp::socket theirs = acceptor.accept();
  CHECK(pto::loopback_peer_uid(theirs.local_endpoint(), theirs.remote_endpoint()) == 65534);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}
