#include "server/http_server.h"
#include "util/socket_owner.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/url/parse.hpp>
#include <atomic>
#include <map>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;

namespace pto {

bool split_listen(const std::string& spec, std::string& address, unsigned short& port) {
  auto colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  address = spec.substr(0, colon);
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') address = address.substr(1, address.size() - 2);
  std::string p = spec.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  long n = std::stol(p);
  if (n > 65535) return false;
  port = static_cast<unsigned short>(n);
  return true;
}

/// Who a connection is from, for the per-client cap: its address over TCP, its uid over the Unix socket.
struct ClientKey {
  std::string key;
};

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& io, Handler h, HttpLimits l) : io(io), acceptor(io), unix_acceptor(io), handler(std::move(h)), limits(l) {}
  asio::io_context& io;
  tcp::acceptor acceptor;
  unix_socket::acceptor unix_acceptor;
  std::unique_ptr<asio::ssl::context> tls;
  std::string unix_path;  // removed at stop (a socket it bound, its file still the same: unix_ino)
  ino_t unix_ino = 0;
  Handler handler;
  HttpLimits limits;
  std::size_t connections = 0;                   // admitted, within the caps
  std::map<std::string, std::size_t> by_client;  // admitted connections per client
  std::map<std::string, std::size_t> over_cap;   // connections past a cap still being read, per client
  bool stopped = false;

  enum class Admission { Admitted, OverCap, Closed };
  /// Counts a connection in: within the caps; past one, but read for what must get through; or closed.
  Admission admit(const std::string& client) {
    if (by_client[client] < limits.max_connections_per_client && connections < limits.max_connections) {
      ++connections;
      ++by_client[client];
      return Admission::Admitted;
    }
    if (by_client[client] == 0) by_client.erase(client);
    if (over_cap[client] >= limits.over_cap_per_client) {
      if (over_cap[client] == 0) over_cap.erase(client);
      return Admission::Closed;
    }
    ++over_cap[client];
    return Admission::OverCap;
  }
  void leave(const std::string& client, Admission how) {
    if (how == Admission::Admitted) {
      --connections;
      if (auto it = by_client.find(client); it != by_client.end() && --it->second == 0) by_client.erase(it);
    } else if (how == Admission::OverCap) {
      if (auto it = over_cap.find(client); it != over_cap.end() && --it->second == 0) over_cap.erase(it);
    }
  }

  void accept();
  void accept_unix();
};

namespace {

/// One connection's requests, over any stream Beast reads HTTP from: TCP, TLS over TCP, a Unix socket.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, std::shared_ptr<HttpServer::Impl> server, std::string peer, std::string client, int uid, int gid, bool tls)
      : stream_(std::move(stream)), server_(std::move(server)), peer_(std::move(peer)), client_(std::move(client)), uid_(uid), gid_(gid), tls_(tls) {
    admission_ = server_->admit(client_);
  }
  ~Session() { server_->leave(client_, admission_); }

  void start() {
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(10));
      auto self = this->shared_from_this();
      stream_.async_handshake(asio::ssl::stream_base::server, [self](beast::error_code ec) {
        if (ec) return;  // not TLS, or a bad client: the socket closes with the session
        self->begin();
      });
    } else {
      begin();
    }
  }

 private:
  void begin() {
    if (admission_ == HttpServer::Impl::Admission::Closed) return close();
    read();
  }

  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->limits.max_header_bytes));
    parser_->body_limit(server_->limits.max_body_bytes);
    // Past a cap a connection gets one request read, within 2 s at most.
    const double timeout = admission_ == HttpServer::Impl::Admission::OverCap ? std::min(2.0, server_->limits.read_timeout_seconds)
                                                                              : server_->limits.read_timeout_seconds;
    beast::get_lowest_layer(stream_).expires_after(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout)));
    auto self = this->shared_from_this();
    http::async_read(stream_, buffer_, *parser_, [self](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof || ec == asio::ssl::error::stream_truncated)
      return close();
    if (ec == http::error::header_limit) return send({431, "application/json", R"({"error":"request headers too large"})", {}}, false);
    if (ec == http::error::body_limit) return send({413, "application/json", R"({"error":"request body too large"})", {}}, false);
    if (ec) return send({400, "application/json", R"({"error":"malformed HTTP request"})", {}}, false);
    auto& req = parser_->get();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    // Target, path segments and query through Boost.URL (percent-decoding included); anything that is not
    // an origin-form target ("/path?query") is refused here.
    auto target = boost::urls::parse_origin_form(r.target);
    if (!target) return send({400, "application/json", R"({"error":"malformed request target"})", {}}, false);
    r.path = target->path();
    for (auto seg : target->segments()) r.segments.push_back(seg);
    if (!r.segments.empty() && r.segments.back().empty()) r.segments.pop_back();  // "/api/v1/runs/" as without "/"
    for (auto param : target->params()) r.query[param.key] = param.value;
    if (auto it = req.find(http::field::authorization); it != req.end()) r.authorization = std::string(it->value());
    r.body = std::move(req.body());
    r.peer = peer_;
    r.peer_uid = uid_;
    r.peer_gid = gid_;
    r.tls = tls_;
    r.over_cap = admission_ == HttpServer::Impl::Admission::OverCap;
    bool keep = req.keep_alive() && !r.over_cap;
    // No read is pending until the answer is sent, so a pipelined request waits its turn.
    auto self = this->shared_from_this();
    auto answered = std::make_shared<std::atomic<bool>>(false);
    HttpServer::Respond respond = [self, keep, answered](HttpResponse resp) {
      if (answered->exchange(true)) return;
      asio::post(self->stream_.get_executor(), [self, keep, resp = std::move(resp)] { self->send(resp, keep); });
    };
    try {
      server_->handler(r, respond);
    } catch (const std::exception&) {
      respond({500, "application/json", std::string(R"({"error":"internal error"})"), {}});
    }
  }

  void send(const HttpResponse& r, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "pto-runner/" PTO_RUNNER_VERSION);
    res->set(http::field::content_type, r.content_type);
    res->set(http::field::cache_control, "no-store");
    for (const auto& [k, v] : r.headers) res->set(k, v);
    res->keep_alive(keep_alive);
    res->body() = r.body;
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(30));
    auto self = this->shared_from_this();
    http::async_write(stream_, *res, [self, res, keep_alive](beast::error_code ec, std::size_t) {
      if (ec || !keep_alive) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ec;
    auto& socket = beast::get_lowest_layer(stream_).socket();
    socket.shutdown(asio::socket_base::shutdown_send, ec);
    socket.close(ec);
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpServer::Impl> server_;
  std::string peer_, client_;
  int uid_ = -1, gid_ = -1;
  bool tls_ = false;
  HttpServer::Impl::Admission admission_ = HttpServer::Impl::Admission::Admitted;
};

}  // namespace

void HttpServer::Impl::accept() {
  auto self = shared_from_this();
  acceptor.async_accept([self](beast::error_code ec, tcp::socket socket) {
    if (self->stopped) return;
    if (!ec) {
      beast::error_code pe;
      auto ep = socket.remote_endpoint(pe);
      const std::string address = pe ? "?" : ep.address().to_string();
      const std::string peer = pe ? "?" : address + ":" + std::to_string(ep.port());
      // A local client is counted by its user (every local user comes from 127.0.0.1), another by its address.
      std::string client = address;
      if (!pe && ep.address().is_loopback())
        if (int uid = loopback_peer_uid(socket.local_endpoint(pe), ep); uid >= 0) client = "uid:" + std::to_string(uid);
      if (self->tls)
        std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
            beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *self->tls), self, peer, client, -1, -1, true)
            ->start();
      else
        std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)), self, peer, client, -1, -1, false)->start();
    }
    self->accept();
  });
}

void HttpServer::Impl::accept_unix() {
  auto self = shared_from_this();
  unix_acceptor.async_accept([self](beast::error_code ec, unix_socket::socket socket) {
    if (self->stopped) return;
    if (!ec) {
      // Who connected, from the kernel (SO_PEERCRED): the uid a permission is decided by.
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        const std::string who = "unix:uid=" + std::to_string(cred.uid);
        std::make_shared<Session<beast::basic_stream<unix_socket>>>(beast::basic_stream<unix_socket>(std::move(socket)), self, who,
                                                                    "uid:" + std::to_string(cred.uid),
                                                                    static_cast<int>(cred.uid), static_cast<int>(cred.gid), false)
            ->start();
      }
    }
    self->accept_unix();
  });
}

HttpServer::HttpServer(asio::io_context& io, Handler handler, HttpLimits limits)
    : impl_(std::make_shared<Impl>(io, std::move(handler), limits)) {}

HttpServer::~HttpServer() { stop(); }

std::string HttpServer::listen(const std::string& address, unsigned short port, const TlsFiles& tls, int given_fd) {
  beast::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec) {
    if (given_fd >= 0) ::close(given_fd);
    return "bad listen address '" + address + "': " + ec.message();
  }
  if (tls.enabled()) {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                     asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
    std::string problem;
    ctx->use_certificate_chain_file(tls.cert, ec);
    if (ec) problem = "tls: cannot use the certificate " + tls.cert + ": " + ec.message();
    if (problem.empty()) ctx->use_private_key_file(tls.key, asio::ssl::context::pem, ec);
    if (problem.empty() && ec) problem = "tls: cannot use the key " + tls.key + ": " + ec.message();
    if (!problem.empty()) {
      if (given_fd >= 0) ::close(given_fd);
      return problem;
    }
    impl_->tls = std::move(ctx);
  }
  tcp::endpoint ep(addr, port);
  if (given_fd >= 0) {  // bound and listening already (systemd's, or kept by the supervisor across a restart)
    impl_->acceptor.assign(ep.protocol(), given_fd, ec);
    if (ec) {
      ::close(given_fd);
      return "cannot use the listening socket given for " + address + ":" + std::to_string(port) + ": " + ec.message();
    }
    impl_->accept();
    return "";
  }
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
  impl_->accept();
  return "";
}

std::string HttpServer::listen_unix(const std::string& path, unsigned mode, int given_fd, bool path_not_ours) {
  beast::error_code ec;
  if (given_fd >= 0) {
    impl_->unix_acceptor.assign(unix_socket(), given_fd, ec);
    if (ec) {
      ::close(given_fd);
      return "cannot use the listening socket given for " + path + ": " + ec.message();
    }
  } else {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return "cannot listen on " + path + ": it exists and is not a socket";
      ::unlink(path.c_str());  // an old daemon's
    }
    unix_socket::endpoint ep(path);
    impl_->unix_acceptor.open(ep.protocol(), ec);
    if (!ec) impl_->unix_acceptor.bind(ep, ec);
  }
  if (!ec && ::chmod(path.c_str(), mode) != 0) ec = beast::error_code(errno, boost::system::system_category());
  if (!ec && given_fd < 0) impl_->unix_acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on " + path + ": " + ec.message();
  // Its file is removed at stop only when it is still this socket's and not a socket unit's.
  struct stat st {};
  if (!path_not_ours && ::stat(path.c_str(), &st) == 0) impl_->unix_path = path, impl_->unix_ino = st.st_ino;
  impl_->accept_unix();
  return "";
}

std::vector<int> HttpServer::listening_fds() const {
  std::vector<int> out;
  if (impl_->acceptor.is_open()) out.push_back(impl_->acceptor.native_handle());
  if (impl_->unix_acceptor.is_open()) out.push_back(impl_->unix_acceptor.native_handle());
  return out;
}

unsigned short HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

std::string HttpServer::bound() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  if (ec) return "";
  std::string a = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(ep.port());
}

void HttpServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  beast::error_code ec;
  impl_->acceptor.close(ec);
  impl_->unix_acceptor.close(ec);
  struct stat st {};
  if (!impl_->unix_path.empty() && ::stat(impl_->unix_path.c_str(), &st) == 0 && st.st_ino == impl_->unix_ino)
    ::unlink(impl_->unix_path.c_str());
}

std::size_t HttpServer::open_connections() const { return impl_->connections; }

}  // namespace pto
