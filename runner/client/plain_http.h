#pragma once
// A small synchronous HTTP/1.1 client over Boost.Beast, for plain http:// only, used by `task-submit`.
//
// Why not libcurl (client/api_client): task-submit runs once per batch of test cases, and a process linked
// with libcurl spends ~5 ms resolving the symbols of its ~35 shared libraries before main() (measured:
// bench/README.md); the daemon it talks to is on this host, over plain HTTP. One connection is kept for a
// client's requests (lease, heartbeats, release) and made again when the server has closed it.
#include <map>
#include <memory>
#include <string>

namespace pto {

struct PlainHttpResult {
  bool reached = false;  // false: no connection, or it broke before an answer
  bool wrong_listener = false;  // another user's listener has the address (client/listener_check): nothing sent
  bool sent = false;            // the request went out on a checked connection (a live server took it)
  int status = 0;
  std::string body, error;
  std::map<std::string, std::string> headers;  // lower-case names
};

class PlainHttpClient {
 public:
  /// `base` is http://HOST:PORT (a trailing path is ignored).
  explicit PlainHttpClient(std::string base);
  ~PlainHttpClient();
  /// From now on a new connection is used only once a process has accepted it, waiting at most `seconds`
  /// (else the request is not sent and not reached): a client asking again after its daemon went away wants
  /// the next daemon, not a listener its supervisor keeps while none runs.
  void require_accepted(double seconds);
  /// `target` is the path and query. `timeout_seconds` bounds the whole exchange.
  PlainHttpResult request(const std::string& method, const std::string& target, const std::string& bearer,
                          const std::string& body, double timeout_seconds);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pto
