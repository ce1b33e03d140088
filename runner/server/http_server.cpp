#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>
#include <atomic>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

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


struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& io, Handler h, HttpLimits l) : io(io), acceptor(io), handler(std::move(h)), limits(l) {}
  asio::io_context& io;
  tcp::acceptor acceptor;
  Handler handler;
  HttpLimits limits;
  std::size_t connections = 0;
  bool stopped = false;

  void accept() {
    auto self = shared_from_this();
    acceptor.async_accept([self](beast::error_code ec, tcp::socket socket) {
      if (self->stopped) return;
      if (!ec) self->start_session(std::move(socket));
      self->accept();
    });
  }

  void start_session(tcp::socket socket);
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Impl> server)
      : stream_(std::move(socket)), server_(std::move(server)) {
    ++server_->connections;
    beast::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  ~Session() { --server_->connections; }

  void start(bool over_capacity) {
    if (over_capacity) {
      HttpResponse r{503, "application/json", R"({"error":"too many connections"})", {}};
      send(r, false);
      return;
    }
    read();
  }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->limits.max_header_bytes));
    parser_->body_limit(server_->limits.max_body_bytes);
    stream_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(server_->limits.read_timeout_seconds)));
    auto self = shared_from_this();
    http::async_read(stream_, buffer_, *parser_, [self](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof)
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
    bool keep = req.keep_alive();
    // No read is pending until the answer is sent, so a pipelined request waits its turn.
    auto self = shared_from_this();
    auto answered = std::make_shared<std::atomic<bool>>(false);
    HttpServer::Respond respond = [self, keep, answered](HttpResponse resp) {
      if (answered->exchange(true)) return;
      asio::post(self->stream_.get_executor(), [self, keep, resp = std::move(resp)] { self->send(resp, keep); });
    };
    try {
      server_->handler(r, respond);
    } catch (const std::exception& e) {
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
    stream_.expires_after(std::chrono::seconds(30));
    auto self = shared_from_this();
    http::async_write(stream_, *res, [self, res, keep_alive](beast::error_code ec, std::size_t) {
      if (ec || !keep_alive) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpServer::Impl> server_;
  std::string peer_;
};

}  // namespace

void HttpServer::Impl::start_session(tcp::socket socket) {
  bool over = connections >= limits.max_connections;
  std::make_shared<Session>(std::move(socket), shared_from_this())->start(over);
}

HttpServer::HttpServer(asio::io_context& io, Handler handler, HttpLimits limits)
    : impl_(std::make_shared<Impl>(io, std::move(handler), limits)) {}

HttpServer::~HttpServer() { stop(); }

std::string HttpServer::listen(const std::string& address, unsigned short port) {
  beast::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec) return "bad listen address '" + address + "': " + ec.message();
  tcp::endpoint ep(addr, port);
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message();
  impl_->accept();
  return "";
}

unsigned short HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  beast::error_code ec;
  impl_->acceptor.close(ec);
}

std::size_t HttpServer::open_connections() const { return impl_->connections; }

}  // namespace pto
