#include "client/api_client.h"
#include "util/api_paths.h"
#include "util/token_file.h"

#include <sys/stat.h>

#include <curl/curl.h>

#include <cstdlib>
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
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_seconds);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    r.error = "cannot reach " + url_given + ": " + (errbuf[0] ? errbuf : curl_easy_strerror(rc));
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
