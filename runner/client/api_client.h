#pragma once
// The daemon's HTTP API from the client side (`submit`, `status`), over libcurl.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

struct ApiResponse {
  bool reached = false;  // false: the server could not be reached (exit 3)
  long status = 0;
  std::string body;
  std::string error;
  /// The listener on the daemon's address is another user's (client/listener_check): nothing was sent, and
  /// asking again will not help (the caller exits 3, saying `error`).
  bool wrong_listener = false;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

/// One request on a connection of its own. Before anything is sent, the listener is checked
/// (client/listener_check): a loopback or Unix-socket listener of another user gets nothing, and the answer says
/// so (`wrong_listener`).
ApiResponse api_request(const std::string& method, const std::string& url, const std::string& token = "",
                        const std::string& body = "", long timeout_seconds = 30);

/// The server URL without trailing slashes.
std::string trim_server(std::string server);

/// GET /api/v1/status into `status`, with `token` when given (a daemon beyond loopback wants one for reads too);
/// on failure returns false with the reason in `error`.
bool fetch_status(const std::string& server, const std::string& token, nlohmann::json& status, std::string& error);

/// The token a client shows: --token-file, else $PTO_RUNNER_TOKEN. Empty when neither is set. The admin token
/// and a read token both read; only the admin token (or a run's) changes anything.
std::string read_token(const std::string& token_file, std::string& error);

}  // namespace pto
