#pragma once
// HttpServer: a small HTTP/1.1 server on Boost.Beast, on the daemon's single io_context thread.
//
// It owns transport concerns only: keep-alive, a deadline for reading each request (a client trickling its
// headers one byte a second is dropped when it passes, without holding anyone else up), caps on header and
// body size (431/413), a cap on open connections (503 past it), and 400 for anything that does not parse.
// What a request means is the handler's business (server/api.cpp); it may answer later, from another thread.
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
  std::string peer;
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
  double read_timeout_seconds = 10;  // whole request, headers and body
  std::size_t max_connections = 512;
};

class HttpServer {
 public:
  /// Answers a request exactly once, from any thread (the answer is posted to the server's thread). Slow
  /// work (a git fetch, a large log) is done elsewhere and answered later; the connection waits meanwhile.
  using Respond = std::function<void(HttpResponse)>;
  using Handler = std::function<void(const HttpRequest&, Respond)>;
  HttpServer(boost::asio::io_context& io, Handler handler, HttpLimits limits = {});
  ~HttpServer();
  /// Binds and listens. Returns "" or the error. `port` 0 picks a free port (see port()).
  std::string listen(const std::string& address, unsigned short port);
  unsigned short port() const;
  void stop();
  std::size_t open_connections() const;

  struct Impl;  // public so the session type in the .cpp can name it; defined only there

 private:
  std::shared_ptr<Impl> impl_;
};

/// "127.0.0.1:8787" -> address and port; false when malformed.
bool split_listen(const std::string& spec, std::string& address, unsigned short& port);

}  // namespace pto
