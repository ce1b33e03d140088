#include "notify/notifier.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "notify/notify_message.h"
#include "notify/notify_outbox.h"
#include "util/iso_time.h"

namespace pto {

namespace {

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// How one POST went. `maybe_sent`: it failed after the request may have reached the receiver (a timeout
/// waiting for the answer), so a retry may repeat it.
struct PostResult {
  bool ok = false;
  bool maybe_sent = false;
  std::string error;
};

std::size_t keep_body(char* data, std::size_t size, std::size_t n, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (s->size() < 64 * 1024) s->append(data, size * n);
  return size * n;
}

PostResult post(const std::string& url, const NotifyMessage& m) {
  PostResult r;
  CURL* curl = curl_easy_init();
  if (!curl) {
    r.error = "cannot make an HTTP client";
    return r;
  }
  curl_slist* headers = nullptr;
  for (const std::string& h : m.headers) headers = curl_slist_append(headers, h.c_str());
  std::string answer;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, m.body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(m.body.size()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 5L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    // Nothing reached it when it could not be found or connected to; otherwise it may have.
    r.maybe_sent = !(rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
                     rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT);
    r.error = curl_easy_strerror(rc);
    return r;
  }
  if (status < 200 || status >= 300) {
    r.error = "HTTP " + std::to_string(status) + (answer.empty() ? "" : ": " + answer.substr(0, 200));
    return r;
  }
  // Feishu answers 200 with a non-zero code when it refuses a message (a bad signature, too many requests).
  nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
  if (j.is_object()) {
    const nlohmann::json code = j.contains("code") ? j["code"] : j.contains("StatusCode") ? j["StatusCode"] : nlohmann::json();
    if (code.is_number_integer() && code.get<long long>() != 0) {
      r.error = "refused: " + answer.substr(0, 200);
      return r;
    }
  }
  r.ok = true;
  return r;
}

/// The receiver's secret, read at each delivery (a rotated secret needs no reload): trailing newlines dropped.
bool read_secret(const std::string& path, std::string& secret, std::string& error) {
  secret.clear();
  if (path.empty()) return true;
  std::ifstream in(path);
  if (!in) {
    error = "cannot read its secret-file " + path;
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  secret = ss.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) {
    error = "its secret-file " + path + " is empty";
    return false;
  }
  return true;
}

}  // namespace

Notifier::Notifier(std::string journal, NotifyConfig cfg, std::string host, std::function<void()> changed)
    : journal_(std::move(journal)), host_(std::move(host)), changed_(std::move(changed)), cfg_(std::move(cfg)) {}

Notifier::~Notifier() {
  {
    std::lock_guard<std::mutex> g(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Notifier::start() {
  std::string error;
  adder_ = NotifyOutbox::open(journal_, error);
  if (adder_) sender_ = NotifyOutbox::open(journal_, error);
  if (!adder_ || !sender_) return error;
  {
    std::lock_guard<std::mutex> g(mutex_);
    for (const NotifyReceiver& r : cfg_.receivers) states_[r.name].shown = {r.name, to_string(r.kind), shown_url(r.url)};
  }
  thread_ = std::thread([this] { run(); });
  return "";
}

bool Notifier::notify(const NotifyEvent& e) {
  std::vector<std::string> to;
  {
    std::lock_guard<std::mutex> g(mutex_);
    for (const NotifyReceiver& r : cfg_.receivers)
      if (receiver_wants(r, e)) to.push_back(r.name);
  }
  if (to.empty() || !adder_) return true;
  if (!adder_->add(e, to, epoch_now())) {
    spdlog::error("notification '{}' not kept: {}", e.title, adder_->error());
    return false;
  }
  {
    std::lock_guard<std::mutex> g(mutex_);
    poked_ = true;
  }
  cv_.notify_all();
  return true;
}

void Notifier::reconfigure(NotifyConfig cfg) {
  {
    std::lock_guard<std::mutex> g(mutex_);
    std::map<std::string, State> kept;
    for (const NotifyReceiver& r : cfg.receivers) {
      State st = states_.count(r.name) ? states_[r.name] : State{};
      st.shown.name = r.name, st.shown.kind = to_string(r.kind), st.shown.url = shown_url(r.url);
      st.next_try = 0;  // a fixed receiver is tried at once
      st.failures_in_row = 0;
      ++st.generation;
      kept[r.name] = std::move(st);
    }
    states_ = std::move(kept);
    cfg_ = std::move(cfg);
    poked_ = true;
  }
  cv_.notify_all();
}

std::vector<ReceiverStatus> Notifier::status() const {
  std::lock_guard<std::mutex> g(mutex_);
  std::vector<ReceiverStatus> out;
  for (const NotifyReceiver& r : cfg_.receivers)
    if (auto it = states_.find(r.name); it != states_.end()) out.push_back(it->second.shown);
  return out;
}

double Notifier::queue_stuck_minutes() const {
  std::lock_guard<std::mutex> g(mutex_);
  return cfg_.queue_stuck_minutes;
}

void Notifier::run() {
  double last_prune = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> g(mutex_);
      if (stop_) return;
      poked_ = false;
    }
    const double now = epoch_now();
    if (now - last_prune > 3600) {
      std::vector<std::string> names;
      {
        std::lock_guard<std::mutex> g(mutex_);
        for (const auto& r : cfg_.receivers) names.push_back(r.name);
      }
      sender_->prune(now - 7 * 86400, names);
      last_prune = now;
    }
    const double wake = pass();
    std::unique_lock<std::mutex> lock(mutex_);
    const auto until = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(wake)));
    cv_.wait_until(lock, until, [this] { return stop_ || poked_; });
  }
}

double Notifier::pass() {
  NotifyConfig cfg;
  {
    std::lock_guard<std::mutex> g(mutex_);
    cfg = cfg_;
  }
  const double now = epoch_now();
  double wake = now + 30;  // at least twice a minute: the pending counts for the status
  for (const NotifyReceiver& r : cfg.receivers) {
    State st;
    {
      std::lock_guard<std::mutex> g(mutex_);
      if (stop_) return now;
      auto it = states_.find(r.name);
      if (it == states_.end()) continue;  // removed by a reload meanwhile
      st = it->second;
    }
    const int generation = st.generation;
    deliver(r, st, now, wake);
    // Only what this delivery changed goes back: a reload during it (a new URL, a retry at once) stands.
    std::lock_guard<std::mutex> g(mutex_);
    auto it = states_.find(r.name);
    if (it == states_.end()) continue;
    State& kept = it->second;
    kept.shown.delivered = st.shown.delivered, kept.shown.failures = st.shown.failures, kept.shown.last_error = st.shown.last_error;
    kept.shown.failing = st.shown.failing, kept.shown.failing_since = st.shown.failing_since, kept.shown.last_delivered = st.shown.last_delivered;
    if (kept.generation == generation) kept.failures_in_row = st.failures_in_row, kept.next_try = st.next_try;
  }
  const std::map<std::string, long long> pending = sender_->pending_counts();
  bool changed = false;
  {
    std::lock_guard<std::mutex> g(mutex_);
    for (auto& [name, st] : states_) {
      st.shown.pending = pending.count(name) ? pending.at(name) : 0;
      const std::string now_shown = std::to_string(st.shown.pending) + "/" + std::to_string(st.shown.delivered) + "/" +
                                    std::to_string(st.shown.failures) + "/" + (st.shown.failing ? "1" : "0");
      changed = changed || now_shown != st.last_shown;
      st.last_shown = now_shown;
    }
  }
  if (changed && changed_) changed_();
  return wake;
}

void Notifier::deliver(const NotifyReceiver& r, State& st, double now, double& wake) {
  if (st.next_try > now) {
    wake = std::min(wake, st.next_try);
    return;
  }
  NotifyConfig cfg;
  {
    std::lock_guard<std::mutex> g(mutex_);
    cfg = cfg_;
  }
  const std::vector<OutboxEntry> rows = sender_->pending(r.name, 500);
  if (rows.empty()) return;
  // The group's first event waits for the rest of its group (a run's red steps come one by one).
  const OutboxEntry& head = rows.front();
  if (now < head.created + cfg.group_seconds) {
    wake = std::min(wake, head.created + cfg.group_seconds);
    return;
  }
  std::vector<OutboxEntry> batch;
  // The whole group within its window, also past another group's events in between: messages go in the order
  // of their first events.
  for (const OutboxEntry& e : rows) {
    if (e.created > head.created + cfg.group_seconds || batch.size() >= 200) break;
    if (e.event.group == head.event.group) batch.push_back(e);
  }
  std::vector<long long> ids;
  bool maybe_repeated = false;
  for (const OutboxEntry& e : batch) ids.push_back(e.id), maybe_repeated = maybe_repeated || e.maybe_sent;
  std::string secret, error;
  PostResult result;
  if (read_secret(r.secret_file, secret, error)) {
    const NotifyMessage m = render_message(r, batch, secret, static_cast<long long>(now), maybe_repeated, host_);
    if (!sender_->sending(ids)) {
      error = sender_->error();  // the outbox cannot keep what happens: nothing is sent it could not mark
    } else if ((result = post(r.url, m)).ok && !sender_->delivered(ids, epoch_now())) {
      // Taken, but the outbox cannot say so: not sent again at once (it would be, and again), but after a pause.
      result.ok = false;
      result.error = "delivered, but the outbox cannot mark it (" + sender_->error() + "): it may come again";
      error = result.error;
    } else if (result.ok) {
      st.shown.delivered += 1;
      st.shown.last_delivered = iso_from_epoch(epoch_now());
      if (st.shown.failing) spdlog::info("notify: {} ({}) takes messages again", r.name, shown_url(r.url));
      st.shown.failing = false;
      st.shown.failing_since.clear();
      st.failures_in_row = 0;
      st.next_try = 0;
      wake = now;  // more may be waiting
      return;
    } else {
      sender_->failed(ids, result.error, result.maybe_sent);
      error = result.error;
    }
  }
  st.shown.failures += 1;
  st.shown.last_error = error;
  if (!st.shown.failing) {
    st.shown.failing = true;
    st.shown.failing_since = iso_from_epoch(now);
    spdlog::warn("notify: {} ({}) failed: {}; retrying", r.name, shown_url(r.url), error);
  }
  st.failures_in_row += 1;
  const double delay = std::min(cfg.retry_max_seconds, std::pow(2.0, std::min(st.failures_in_row - 1, 20)));
  st.next_try = now + delay;
  wake = std::min(wake, st.next_try);
}

}  // namespace pto
