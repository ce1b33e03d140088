#include "client/plain_http.h"
#include "client/listener_check.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

namespace pto {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

/// The connection leads to another user's listener: nothing may be sent on it.
struct WrongListener : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// The connection could not be checked (it closed, or nothing took it up in time): nothing was sent.
struct Unchecked : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PlainHttpClient::Impl {
  std::string base, host, port, hostport, error;
  boost::asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  double accept_wait = 0;  // require_accepted(): a new connection must be taken up by a process within this

  void connect(std::chrono::steady_clock::duration deadline) {
    stream.emplace(io);
    buffer.clear();
    stream->expires_after(deadline);
    beast::error_code ec;
    auto address = boost::asio::ip::make_address(host, ec);
    if (!ec) {  // the usual 127.0.0.1: no resolver
      stream->connect(tcp::endpoint(address, static_cast<unsigned short>(std::stoi(port))));
    } else {
      tcp::resolver resolver(io);
      stream->connect(resolver.resolve(host, port));
    }
    const double wait = std::min(std::chrono::duration<double>(deadline).count(), accept_wait > 0 ? accept_wait : 10.0);
    if (std::string e = check_listener(stream->socket().native_handle(), wait, accept_wait > 0); !e.empty()) {
      stream.reset();
      if (e.rfind(kListenerRefused, 0) == 0) throw WrongListener(e);
      throw Unchecked("cannot reach " + base + ": " + e);
    }
  }
};

PlainHttpClient::PlainHttpClient(std::string base) : impl_(std::make_unique<Impl>()) {
  Impl& i = *impl_;
  i.base = std::move(base);
  const std::string scheme = "http://";
  if (i.base.compare(0, scheme.size(), scheme) != 0) {
    i.error = "only http:// URLs are supported here, got " + i.base;
    return;
  }
  std::string rest = i.base.substr(scheme.size());
  i.hostport = rest.substr(0, rest.find('/'));
  i.host = i.hostport;
  i.port = "80";
  if (!i.hostport.empty() && i.hostport.front() == '[') {  // [::1]:8787
    std::size_t close = i.hostport.find(']');
    i.host = i.hostport.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    if (close != std::string::npos && close + 1 < i.hostport.size() && i.hostport[close + 1] == ':') i.port = i.hostport.substr(close + 2);
  } else if (auto colon = i.hostport.rfind(':'); colon != std::string::npos) {
    i.host = i.hostport.substr(0, colon);
    i.port = i.hostport.substr(colon + 1);
  }
}

void PlainHttpClient::require_accepted(double seconds) { impl_->accept_wait = seconds; }

PlainHttpClient::~PlainHttpClient() {
  if (impl_->stream) {
    beast::error_code ec;
    impl_->stream->socket().shutdown(tcp::socket::shutdown_both, ec);
  }
}

PlainHttpResult PlainHttpClient::request(const std::string& method, const std::string& target, const std::string& bearer,
                                         const std::string& body, double timeout_seconds) {
  Impl& i = *impl_;
  PlainHttpResult r;
  if (!i.error.empty()) {
    r.error = i.error;
    return r;
  }
  auto deadline = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_seconds));
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, i.hostport);
  req.set(http::field::user_agent, "pto-task-submit");
  req.keep_alive(true);
  if (!bearer.empty()) req.set(http::field::authorization, "Bearer " + bearer);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  // A kept connection the server has closed meanwhile (its idle timeout) fails on first use: once more, new.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool fresh = !i.stream;
    try {
      if (fresh) i.connect(deadline);
      i.stream->expires_after(deadline);
      http::write(*i.stream, req);
      r.sent = true;
      http::response_parser<http::string_body> parser;
      parser.body_limit(64 << 20);
      http::read(*i.stream, i.buffer, parser);
      auto& res = parser.get();
      r.reached = true;
      r.status = static_cast<int>(res.result_int());
      r.body = std::move(res.body());
      for (const auto& f : res) {
        std::string name(f.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        r.headers[name] = std::string(f.value());
      }
      if (!res.keep_alive()) i.stream.reset();
      return r;
    } catch (const WrongListener& e) {
      r.wrong_listener = true;
      r.error = e.what();
      return r;
    } catch (const Unchecked& e) {
      r.error = e.what();
      return r;
    } catch (const std::exception& e) {
      i.stream.reset();
      r.error = "cannot reach " + i.base + ": " + e.what();
      if (fresh) return r;
    }
  }
  return r;
}

}  // namespace pto
