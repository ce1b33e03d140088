#pragma once
// Fetching one artifact into a file: libcurl for http(s) and file:// URLs, plain copies for a mirror
// directory. Downloads go to a temp file beside the destination and are renamed into place only by the
// caller after the digest checks out, so a half-written download never carries the trusted name.
#include <string>

namespace pto {

struct FetchResult {
  bool ok = false;
  bool not_found = false;  // 404 / no such file: try the next source, do not retry
  long http_status = 0;
  std::string error;  // names the URL and the HTTP status or curl error
};

struct FetchOptions {
  int retries = 3;                 // extra attempts on transient errors (5xx, 408, 429, timeouts, resets)
  double backoff_seconds = 0.5;    // doubled after each attempt
  long long max_bytes = 4LL << 30;
  long connect_timeout_seconds = 30;
};

/// Downloads `url` into `dest` (overwritten). http://, https:// and file:// only.
FetchResult fetch_url(const std::string& url, const std::string& dest, const FetchOptions& opts);

}  // namespace pto
