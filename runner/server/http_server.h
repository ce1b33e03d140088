#pragma once
// HttpServer: a small HTTP/1.1 server on Boost.Beast, on the daemon's single io_context thread.
//
// It owns transport concerns only: keep-alive, a deadline for reading each request (a client trickling its
// headers one byte a second is dropped when it passes, without holding anyone else up), caps on header and
// body size (431/413), a cap on open connections (503 past it), and 400 for anything that does not parse.
// What a request means is the handler's business (server/api.cpp); it may answer later, from another thread.
// It listens on TCP (optionally TLS) and, for local clients whose uid is to be known, on a Unix socket.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace pto {

struct HttpRequest {
  std::string method;
  std::string target;  // path and query, as sent
  std::string path;    // decoded path without the query
  std::vector<std::string> segments;  // the decoded path's segments ("/api/v1/status" -> api, v1, status)
  std::map<std::string, std::string> query;  // decoded; a repeated key keeps its last value
  std::string authorization;
  std::string body;
  std::string peer;        // ADDRESS:PORT, or "unix:uid=N" over the Unix socket
  int peer_uid = -1;       // over the Unix socket: the client's uid (SO_PEERCRED); -1 over TCP
  int peer_gid = -1;
  bool tls = false;        // it came over TLS
  /// Its client (its uid on loopback and the Unix socket, else its address) holds more connections than
  /// max-connections-per-client, or the server more than max-connections: the handler answers only what must
  /// get through (/healthz, the admin, a running step's leases), and the connection closes after.
  bool over_cap = false;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type and Cache-Control
};

struct HttpLimits {
  std::size_t max_header_bytes = 8 * 1024;
  std::size_t max_body_bytes = 1024 * 1024;
  double read_timeout_seconds = 10;  // whole request, headers and body (runner.yml request-timeout-seconds)
  std::size_t max_connections = 512;
  /// Open connections one client may hold (one address over TCP, one uid over the Unix socket): a local user
  /// opening hundreds must not make everyone else's requests answer 503.
  std::size_t max_connections_per_client = 64;
  /// Connections past a cap that are still read (one request each, within 2 s), per client: beyond them a
  /// client's connections are closed at once, so one client can neither starve the others nor fill the table.
  std::size_t over_cap_per_client = 16;
};

/// TLS for a listener that is not on loopback: a PEM certificate chain and its private key.
struct TlsFiles {
  std::string cert, key;
  bool enabled() const { return !cert.empty(); }
};

class HttpServer {
 public:
  /// Answers a request exactly once, from any thread (the answer is posted to the server's thread). Slow
  /// work (a git fetch, a large log) is done elsewhere and answered later; the connection waits meanwhile.
  using Respond = std::function<void(HttpResponse)>;
  using Handler = std::function<void(const HttpRequest&, Respond)>;
  HttpServer(boost::asio::io_context& io, Handler handler, HttpLimits limits = {});
  ~HttpServer();
  /// Binds and listens. Returns "" or the error. `port` 0 picks a free port (see port()). With `tls`, every
  /// connection is TLS (the certificate and key are read now; an error names the file).
  /// `given_fd`: a socket already bound there and listening (server/inherited_listeners), used instead of
  /// binding; the server owns it from then on (closed on failure too).
  std::string listen(const std::string& address, unsigned short port, const TlsFiles& tls = {}, int given_fd = -1);
  /// Also listens on a Unix socket at `path` (made with `mode`; an old socket file there is replaced, anything
  /// else refused): each request carries its client's uid and gid. `given_fd` as for listen(); `path_not_ours`:
  /// its file belongs to whoever gave the socket (a systemd socket unit) and stays when the server stops.
  std::string listen_unix(const std::string& path, unsigned mode, int given_fd = -1, bool path_not_ours = false);
  /// Its listening sockets (TCP, then the Unix one when it has one), still its own: for copies that outlive the
  /// daemon (the supervisor keeps them across a restart).
  std::vector<int> listening_fds() const;
  unsigned short port() const;
  /// ADDRESS:PORT it is bound to (a port of 0 resolved).
  std::string bound() const;
  void stop();
  std::size_t open_connections() const;

  struct Impl;  // public so the session type in the .cpp can name it; defined only there

 private:
  std::shared_ptr<Impl> impl_;
};

/// "127.0.0.1:8787" -> address and port; false when malformed.
bool split_listen(const std::string& spec, std::string& address, unsigned short& port);

}  // namespace pto
