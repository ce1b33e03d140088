#pragma once
// ApiEndpoints: where a daemon is reached, and the API behind it. The API on runner.yml's `listen` (TLS beyond
// loopback, or plain with insecure-listen, said at start), on `listen-unix` for local submitters, and the
// steps' own loopback endpoint (`steps-listen`, their task-submit calls; its port kept across restarts). Each
// listening socket is taken where one is given (systemd's LISTEN_FDS, the step supervisor's copies:
// server/inherited_listeners) and bound here otherwise; the ones in use are what the supervisor keeps while
// the daemon is away (SPEC "A step cannot take the daemon's place").
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/runner_config.h"
#include "server/api.h"
#include "server/http_server.h"

namespace boost::asio {
class io_context;
class thread_pool;
}

namespace pto {

class Access;
class InheritedListeners;

/// Where to listen, from runner.yml and the command line, checked: ADDRESS:PORT, TLS beyond loopback.
struct EndpointSettings {
  std::string address;  // `listen`
  unsigned short port = 0;
  bool loopback = true;
  TlsFiles tls;
  std::string steps_listen;  // `steps-listen`, loopback
  /// From runner.yml (the file paths resolved under `root`) and the overrides (serve --listen, --steps-listen).
  /// "" or what is wrong (a configuration error: serve exits 2). Beyond loopback reads need a token too:
  /// `access` is told, with runner.yml's read-token-file when it names one.
  static std::string read(const RunnerConfig& cfg, const std::string& root, const std::string& listen_override,
                          const std::string& steps_override, Access& access, EndpointSettings& out);
};

class ApiEndpoints {
 public:
  /// The API over `model` and `commands` (its own: they live as long as something can call them), with
  /// `access` deciding who may do what; `workers` read files off the engine thread.
  ApiEndpoints(boost::asio::io_context& io, boost::asio::thread_pool* workers, const ReadModel& model,
               std::unique_ptr<HostCommands> commands, Access& access);
  ~ApiEndpoints();

  /// Listens as `settings` says, on the sockets `given` holds for those addresses where it does. "" or why
  /// not; `config_error` is set when the fault is runner.yml's (listen-unix, submit-group), not the host's.
  std::string open(const EndpointSettings& settings, const RunnerConfig& cfg, HttpLimits limits, InheritedListeners& given,
                   const std::string& state_dir, bool& config_error);
  /// Accepts nothing more (a stop for good).
  void stop();
  bool listening() const { return server_ != nullptr; }

  /// Where it is reachable, as bound: http[s]://ADDRESS:PORT.
  std::string url() const;
  unsigned short port() const;
  /// The steps' own endpoint: http://127.0.0.1:PORT.
  std::string steps_url() const;
  /// Its listening sockets by name ("api", "unix", "steps"), still its own: the copies a supervisor keeps.
  std::vector<std::pair<std::string, int>> sockets() const;

 private:
  std::unique_ptr<HostCommands> commands_;  // before the API that calls them
  Api api_;
  EndpointSettings settings_;
  boost::asio::io_context& io_;
  Access& access_;
  std::unique_ptr<HttpServer> server_;        // the API: `listen` (and `listen-unix`)
  std::unique_ptr<HttpServer> steps_server_;  // loopback, plain: the steps' own
};

}  // namespace pto
