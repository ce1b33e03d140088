#include "toolchain/fetch.h"

#include <curl/curl.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace pto {

namespace {

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

size_t write_to_file(char* data, size_t size, size_t n, void* user) {
  return std::fwrite(data, size, n, static_cast<std::FILE*>(user)) * size;
}

bool transient_status(long status) { return status == 408 || status == 429 || status >= 500; }

}  // namespace

FetchResult fetch_url(const std::string& url, const std::string& dest, const FetchOptions& opts) {
  static CurlGlobal global;
  FetchResult result;
  double backoff = opts.backoff_seconds;
  for (int attempt = 0; attempt <= opts.retries; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff *= 2;
    }
    std::FILE* out = std::fopen(dest.c_str(), "wb");
    if (!out) {
      result.error = "cannot write " + dest;
      return result;
    }
    CURL* curl = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https,file");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_to_file);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, opts.connect_timeout_seconds);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);  // a stalled transfer is a transient error
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(opts.max_bytes));
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "pto-runner/" PTO_RUNNER_VERSION);
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    bool write_ok = std::fclose(out) == 0;
    result.http_status = status;
    const bool is_file = url.rfind("file://", 0) == 0;
    if (rc == CURLE_OK && (is_file || (status >= 200 && status < 300)) && write_ok) {
      result.ok = true;
      result.error.clear();
      return result;
    }
    if (rc == CURLE_FILE_COULDNT_READ_FILE || status == 404 || status == 410) {
      result.not_found = true;
      result.error = is_file ? "no such file: " + url : "HTTP " + std::to_string(status) + " from " + url;
      return result;
    }
    if (rc == CURLE_OK) {
      result.error = "HTTP " + std::to_string(status) + " from " + url;
      if (!transient_status(status)) return result;  // 4xx: retrying will not help
    } else {
      result.error = std::string("curl error ") + std::to_string(rc) + " (" +
                     (errbuf[0] ? errbuf : curl_easy_strerror(rc)) + ") fetching " + url;
      if (rc == CURLE_FILESIZE_EXCEEDED || rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT) return result;
    }
    result.error += " (attempt " + std::to_string(attempt + 1) + " of " + std::to_string(opts.retries + 1) + ")";
  }
  return result;
}

}  // namespace pto
