#include "server/api_endpoints.h"

#include <algorithm>
#include <cstdio>

#include <boost/asio/ip/address.hpp>
#include <spdlog/spdlog.h>

#include "config/project.h"
#include "server/access.h"
#include "server/inherited_listeners.h"
#include "server/local_socket.h"
#include "util/token_file.h"

namespace pto {

std::string EndpointSettings::read(const RunnerConfig& cfg, const std::string& root, const std::string& listen_override,
                                   const std::string& steps_override, Access& access, EndpointSettings& out) {
  // Loopback by default. Beyond loopback every read needs a token too, and the traffic TLS (or an explicit
  // insecure-listen, said at start), as GitHub's runner or Buildkite's agent would insist on.
  const std::string listen = listen_override.empty() ? cfg.listen : listen_override;
  if (!split_listen(listen, out.address, out.port)) return "bad listen address '" + listen + "' (want ADDRESS:PORT)";
  out.steps_listen = cfg.steps_listen;  // checked when runner.yml was read
  if (!steps_override.empty()) {
    std::string a;
    unsigned short p = 0;
    boost::system::error_code ec;
    if (!split_listen(steps_override, a, p) || !boost::asio::ip::make_address(a, ec).is_loopback() || ec)
      return "bad --steps-listen '" + steps_override + "' (want a loopback ADDRESS:PORT)";
    out.steps_listen = steps_override;
  }
  boost::system::error_code addr_ec;
  const auto addr = boost::asio::ip::make_address(out.address, addr_ec);
  out.loopback = !addr_ec && addr.is_loopback();
  out.tls = {resolve_under_root(root, cfg.tls_cert), resolve_under_root(root, cfg.tls_key)};
  if (!out.loopback && !out.tls.enabled() && !cfg.insecure_listen)
    return "listen " + listen + " is not loopback: give tls: {cert, key} in runner.yml, or insecure-listen: true to serve plain HTTP there";
  if (out.loopback) return "";
  access.set_reads_need_token(true);
  if (cfg.read_token_file.empty()) return "";
  std::string error;
  std::string read_token = read_private_token_file(resolve_under_root(root, cfg.read_token_file), error);
  if (!error.empty()) return "read-token-file: " + error;
  access.set_read_token(read_token);
  return "";
}

ApiEndpoints::ApiEndpoints(boost::asio::io_context& io, boost::asio::thread_pool* workers, const ReadModel& model,
                           std::unique_ptr<HostCommands> commands, Access& access)
    : commands_(std::move(commands)), api_(io, workers, model, *commands_, access), io_(io), access_(access) {}

ApiEndpoints::~ApiEndpoints() = default;

std::string ApiEndpoints::open(const EndpointSettings& settings, const RunnerConfig& cfg, HttpLimits limits, InheritedListeners& given,
                               const std::string& state_dir, bool& config_error) {
  settings_ = settings;
  config_error = false;
  limits.max_connections_per_client = static_cast<std::size_t>(cfg.max_connections_per_client);
  limits.read_timeout_seconds = cfg.request_timeout_seconds;
  auto handler = [this](const HttpRequest& r, HttpServer::Respond respond) { api_.handle(r, std::move(respond)); };
  server_ = std::make_unique<HttpServer>(io_, handler, limits);
  if (std::string e = server_->listen(settings.address, settings.port, settings.tls, given.take_tcp(settings.address, settings.port, "api"));
      !e.empty())
    return e;
  if (!cfg.listen_unix.empty()) {
    if (std::string e = open_local_socket(*server_, access_, cfg, given.take_unix(cfg.listen_unix)); !e.empty()) {
      config_error = true;
      return e;
    }
    spdlog::info("listen-unix: {}{}", cfg.listen_unix, cfg.submit_group.empty() ? " (root only)" : " (submitters: group " + cfg.submit_group + ")");
  }
  if (!settings.loopback && !settings.tls.enabled())
    spdlog::warn("insecure-listen: serving plain HTTP on {}, beyond loopback: tokens cross the network unencrypted", server_->bound());
  // Its own steps reach it on a loopback port of their own, in plain HTTP (their task-submit speaks nothing
  // else), with the same API. A harness may keep hundreds of task-submit clients waiting at once, each a
  // connection, all of one run's user: there one client's share is larger than on the public port, so a
  // local user flooding the public port does not stop the steps' leases, nor one run's clients the others'.
  HttpLimits steps_limits = limits;
  steps_limits.max_connections = std::max<std::size_t>(limits.max_connections, 4096);
  steps_limits.max_connections_per_client = std::max<std::size_t>(limits.max_connections_per_client, 1024);
  std::string steps_address;
  unsigned short steps_port = 0;
  split_listen(settings.steps_listen, steps_address, steps_port);
  // With port 0 its port is kept in the state dir and taken again at the next start: the steps a next daemon
  // takes over (hosting/run_host_adopt.cpp) still reach it at the address their environment says. Taken meanwhile (no
  // supervisor kept it): another port.
  const std::string port_file = state_dir + "/steps-endpoint-port";
  unsigned short port = steps_port;
  if (std::FILE* f = steps_port == 0 ? std::fopen(port_file.c_str(), "r") : nullptr) {
    if (std::fscanf(f, "%hu", &port) != 1) port = 0;
    std::fclose(f);
  }
  const int steps_fd = given.take_tcp(steps_address, steps_port, "steps");
  steps_server_ = std::make_unique<HttpServer>(io_, handler, steps_limits);
  if (std::string e = steps_server_->listen(steps_address, port, {}, steps_fd); !e.empty()) {
    if (steps_port != 0) return "the steps' own endpoint (steps-listen): " + e;
    steps_server_ = std::make_unique<HttpServer>(io_, handler, steps_limits);
    if (port) spdlog::warn("the steps' own endpoint cannot have port {} again ({}): steps taken over cannot lease cards", port, e);
    if (std::string e2 = steps_server_->listen(steps_address, 0); !e2.empty()) return "the steps' own endpoint: " + e2;
  }
  if (std::FILE* f = std::fopen(port_file.c_str(), "w")) {
    std::fprintf(f, "%u\n", static_cast<unsigned>(steps_server_->port()));
    std::fclose(f);
  }
  for (const auto& unused : given.close_rest())
    spdlog::warn("a listening socket given to this daemon is bound to {}, where runner.yml no longer listens: closed", unused);
  return "";
}

void ApiEndpoints::stop() {
  if (server_) server_->stop();
  if (steps_server_) steps_server_->stop();
}

std::string ApiEndpoints::url() const {
  if (!server_) return "";
  return std::string(settings_.tls.enabled() ? "https://" : "http://") + server_->bound();
}

unsigned short ApiEndpoints::port() const { return server_ ? server_->port() : 0; }

std::string ApiEndpoints::steps_url() const { return steps_server_ ? "http://" + steps_server_->bound() : ""; }

std::vector<std::pair<std::string, int>> ApiEndpoints::sockets() const {
  std::vector<std::pair<std::string, int>> out;
  if (server_) {
    const std::vector<int> api = server_->listening_fds();
    for (std::size_t i = 0; i < api.size(); ++i) out.push_back({i == 0 ? "api" : "unix", api[i]});
  }
  if (steps_server_)
    for (int fd : steps_server_->listening_fds()) out.push_back({"steps", fd});
  return out;
}

}  // namespace pto
