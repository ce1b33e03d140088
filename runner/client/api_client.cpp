#include "client/api_client.h"
#include "client/listener_check.h"
#include "util/api_paths.h"
#include "util/token_file.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace pto {

namespace {
size_t collect(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}
size_t header_line(char* data, size_t size, size_t n, void* user) {
  std::string line(data, size * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
    (*static_cast<std::map<std::string, std::string>*>(user))[name] = value;
  }
  return size * n;
}
constexpr long kConnectSeconds = 10;

/// The connection is made here rather than by libcurl, so that its listener is checked before libcurl sends
/// a byte on it (libcurl's external-socket hooks: it is handed a connected socket).
struct CheckedDial {
  std::string refused;  // why the listener was refused (another user's), or why it was not checked
  int connect_errno = 0;
  /// What check_listener said: a refusal of another user's listener, else "" (then a later address libcurl
  /// tries, which passes, is used).
  void checked(std::string why) {
    refused = why.rfind(kListenerRefused, 0) == 0 ? std::move(why) : std::string();
    if (!why.empty() && refused.empty()) unchecked = std::move(why);
  }
  std::string unchecked;  // the connection closed, or nothing accepted it: unreachable, not refused
};

/// libcurl (7.88) connects a Unix socket again whatever its callbacks say: there the listener is checked on a
/// connection of its own first (client/listener_check also makes sure nobody else can change what the path
/// leads to meanwhile), and libcurl gets a fresh socket to connect.
curl_socket_t open_unix_checked(CheckedDial& dial, curl_sockaddr* a) {
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0 || ::connect(probe, &a->addr, a->addrlen) != 0) {
    dial.connect_errno = errno;
    if (probe >= 0) ::close(probe);
    return CURL_SOCKET_BAD;
  }
  std::string why = check_listener(probe, kConnectSeconds);
  ::close(probe);
  dial.checked(why);
  if (!why.empty()) return CURL_SOCKET_BAD;
  return ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

curl_socket_t open_checked(void* user, curlsocktype, curl_sockaddr* a) {
  if (a->family == AF_UNIX) return open_unix_checked(*static_cast<CheckedDial*>(user), a);
  const int fd = ::socket(a->family, a->socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->protocol);
  if (fd < 0) {
    static_cast<CheckedDial*>(user)->connect_errno = errno;
    return CURL_SOCKET_BAD;
  }
  int rc = ::connect(fd, &a->addr, a->addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    const bool ready = ::poll(&p, 1, static_cast<int>(kConnectSeconds * 1000)) == 1;
    if (ready && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) rc = 0;
    else errno = ready ? err : ETIMEDOUT;
  }
  if (rc != 0) {
    static_cast<CheckedDial*>(user)->connect_errno = errno;
    ::close(fd);
    return CURL_SOCKET_BAD;
  }
  std::string why = check_listener(fd, kConnectSeconds);
  static_cast<CheckedDial*>(user)->checked(why);
  if (!why.empty()) {
    ::close(fd);
    return CURL_SOCKET_BAD;
  }
  return fd;
}

/// A TCP socket open_checked connected and checked; a Unix one libcurl connects itself.
int already_connected(void*, curl_socket_t fd, curlsocktype) {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 ? CURL_SOCKOPT_ALREADY_CONNECTED : CURL_SOCKOPT_OK;
}

}  // namespace

ApiResponse api_request(const std::string& method, const std::string& url_given, const std::string& token,
                        const std::string& body, long timeout_seconds) {
  ApiResponse r;
  // `unix:/run/pto-runner/api.sock/api/v1/...`: the daemon's listen-unix socket (the kernel tells it who we
  // are: a local submitter needs no token). The socket is the longest leading path that is one.
  std::string url = url_given, socket_path;
  if (url.rfind("unix:", 0) == 0) {
    const std::string rest = url.substr(5);
    std::size_t at = rest.size();
    while (at > 0) {
      struct stat st {};
      if (::stat(rest.substr(0, at).c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
        socket_path = rest.substr(0, at);
        url = "http://localhost" + (at < rest.size() ? rest.substr(at) : std::string("/"));
        break;
      }
      at = rest.rfind('/', at - 1);
      if (at == std::string::npos) break;
    }
    if (socket_path.empty()) {
      r.error = "cannot reach " + url_given + ": no Unix socket on that path";
      return r;
    }
  }
  CURL* curl = curl_easy_init();
  if (!socket_path.empty()) curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, socket_path.c_str());
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  std::string auth;
  if (!token.empty()) {
    auth = "Authorization: Bearer " + token;
    headers = curl_slist_append(headers, auth.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header_line);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r.headers);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, kConnectSeconds);
  CheckedDial dial;
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, open_checked);
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, &dial);
  curl_easy_setopt(curl, CURLOPT_SOCKOPTFUNCTION, already_connected);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_seconds);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK && !dial.refused.empty()) {
    r.wrong_listener = true;
    r.error = dial.refused;
    return r;
  }
  if (rc != CURLE_OK) {
    r.error = "cannot reach " + url_given + ": " +
              (!dial.unchecked.empty() ? dial.unchecked
               : dial.connect_errno    ? std::strerror(dial.connect_errno)
               : errbuf[0]             ? errbuf
                                       : curl_easy_strerror(rc));
    return r;
  }
  r.reached = true;
  return r;
}

std::string trim_server(std::string server) {
  while (!server.empty() && server.back() == '/') server.pop_back();
  return server;
}

bool fetch_status(const std::string& server, const std::string& token, nlohmann::json& status, std::string& error) {
  ApiResponse r = api_request("GET", trim_server(server) + api_path::kStatus, token);
  if (!r.reached || r.status != 200) {
    error = r.reached ? "HTTP " + std::to_string(r.status) + " from " + server : r.error;
    return false;
  }
  status = nlohmann::json::parse(r.body, nullptr, false);
  if (status.is_discarded()) {
    error = server + " sent something that is not JSON";
    return false;
  }
  return true;
}

std::string read_token(const std::string& token_file, std::string& error) {
  if (!token_file.empty()) return read_token_file(token_file, error);
  const char* env = std::getenv("PTO_RUNNER_TOKEN");
  return env ? env : "";
}

}  // namespace pto
