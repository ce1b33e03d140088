#include "notify/notifier.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <thread>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "notify/notify_message.h"
#include "notify/notify_outbox.h"
#include "util/clock.h"
#include "util/iso_time.h"

namespace pto {

namespace {

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

/// libcurl asks this while a transfer goes on: a sender told to stop ends its transfer at once.
int abort_when_stopping(void* stopping, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(stopping)->load() ? 1 : 0;
}

PostResult post(const std::string& url, const NotifyMessage& m, const std::atomic<bool>& stopping) {
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
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, abort_when_stopping);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(&stopping));
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

/// One receiver's sender: its thread, its own outbox connection, its retry timing and what the status shows.
/// Everything but the thread's locals is guarded by `m`.
struct Notifier::Sender {
  Sender(NotifyReceiver r, NotifyConfig c, std::unique_ptr<NotifyOutbox> o, const std::string& host, std::function<void()> changed)
      : name(r.name), receiver(std::move(r)), cfg(std::move(c)), outbox(std::move(o)), host(host), changed(std::move(changed)) {
    shown = {receiver.name, to_string(receiver.kind), shown_url(receiver.url)};
  }
  ~Sender() { stop_and_join(); }

  void start() { thread = std::thread([this] { run(); }); }
  void poke() {
    {
      std::lock_guard<std::mutex> g(m);
      poked = true;
    }
    cv.notify_all();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> g(m);
      stopping = true;
    }
    aborting = true;  // a transfer under way ends now (a hung receiver must not hold up a stop)
    cv.notify_all();
  }
  void stop_and_join() {
    stop();
    if (thread.joinable()) thread.join();
  }
  /// A reload: its new settings; tried again at once.
  void reconfigure(const NotifyReceiver& r, const NotifyConfig& c) {
    {
      std::lock_guard<std::mutex> g(m);
      receiver = r;
      cfg = c;
      shown.kind = to_string(r.kind), shown.url = shown_url(r.url);
      next_try = 0;
      failures_in_row = 0;
      ++generation;
      poked = true;
    }
    cv.notify_all();
  }
  ReceiverStatus status() const {
    std::lock_guard<std::mutex> g(m);
    return shown;
  }
  void count_dropped(long long n) {
    std::lock_guard<std::mutex> g(m);
    shown.dropped += n;
  }

  void run();
  /// Sends its next message if one is due; returns when it must look next (seconds since the epoch).
  double deliver(double now);

  const std::string name;  // its key, never reloaded (a renamed receiver is another one): read without `m`
  NotifyReceiver receiver;
  NotifyConfig cfg;
  std::unique_ptr<NotifyOutbox> outbox;  // this thread's connection
  std::string host;
  std::function<void()> changed;
  mutable std::mutex m;
  std::condition_variable cv;
  bool stopping = false, poked = false;
  int failures_in_row = 0;
  double next_try = 0;
  int generation = 0;  // bumped by a reload: a delivery that began before it leaves its retry timing alone
  ReceiverStatus shown;
  std::string last_shown;  // what status() said after the last delivery: a change is told (changed)
  std::atomic<bool> aborting{false};  // stop() was called: libcurl's transfer ends
  std::atomic<bool> done{false};
  std::thread thread;
};

void Notifier::Sender::run() {
  double last_prune = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> g(m);
      if (stopping) break;
      poked = false;
    }
    const double now = epoch_now();
    if (now - last_prune > 3600) {  // its own delivered rows, after a week
      outbox->prune_delivered(now - 7 * 86400);
      last_prune = now;
    }
    const double wake = deliver(now);
    const long long pending = outbox->pending_count(name);
    bool told = false;
    {
      std::lock_guard<std::mutex> g(m);
      shown.pending = pending;
      const std::string now_shown = std::to_string(shown.pending) + "/" + std::to_string(shown.delivered) + "/" +
                                    std::to_string(shown.failures) + "/" + std::to_string(shown.dropped) + "/" + (shown.failing ? "1" : "0");
      told = now_shown != last_shown;
      last_shown = now_shown;
    }
    if (told && changed) changed();
    std::unique_lock<std::mutex> lock(m);
    const auto until = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(wake)));
    cv.wait_until(lock, until, [this] { return stopping || poked; });
  }
  done = true;
}

double Notifier::Sender::deliver(double now) {
  NotifyReceiver r;
  NotifyConfig c;
  int gen = 0;
  {
    std::lock_guard<std::mutex> g(m);
    if (next_try > now) return next_try;
    r = receiver, c = cfg, gen = generation;
  }
  double wake = now + 30;  // at least twice a minute: the pending count for the status
  const std::vector<OutboxEntry> rows = outbox->pending(r.name, 500);
  if (rows.empty()) return wake;
  // The group's first event waits for the rest of its group (a run's red steps come one by one).
  const OutboxEntry& head = rows.front();
  if (now < head.created + c.group_seconds) return std::min(wake, head.created + c.group_seconds);
  std::vector<OutboxEntry> batch;
  // The whole group within its window, also past another group's events in between: messages go in the order
  // of their first events.
  for (const OutboxEntry& e : rows) {
    if (e.created > head.created + c.group_seconds || batch.size() >= 200) break;
    if (e.event.group == head.event.group) batch.push_back(e);
  }
  std::vector<long long> ids;
  bool maybe_repeated = false;
  for (const OutboxEntry& e : batch) ids.push_back(e.id), maybe_repeated = maybe_repeated || e.maybe_sent;
  std::string secret, error;
  PostResult result;
  if (read_secret(r.secret_file, secret, error)) {
    const NotifyMessage msg = render_message(r, batch, secret, static_cast<long long>(now), maybe_repeated, host);
    if (!outbox->sending(ids)) {
      error = outbox->error();  // the outbox cannot keep what happens: nothing is sent it could not mark
    } else if ((result = post(r.url, msg, aborting)).ok && !outbox->delivered(ids, epoch_now())) {
      // Taken, but the outbox cannot say so: not sent again at once (it would be, and again), but after a pause.
      result.ok = false;
      result.error = "delivered, but the outbox cannot mark it (" + outbox->error() + "): it may come again";
      error = result.error;
    } else if (result.ok) {
      std::lock_guard<std::mutex> g(m);
      shown.delivered += 1;
      shown.last_delivered = iso_from_epoch(epoch_now());
      if (shown.failing) spdlog::info("notify: {} ({}) takes messages again", r.name, shown_url(r.url));
      shown.failing = false;
      shown.failing_since.clear();
      if (generation == gen) failures_in_row = 0, next_try = 0;
      return now;  // more may be waiting
    } else {
      outbox->failed(ids, result.error, result.maybe_sent);
      error = result.error;
    }
  }
  std::lock_guard<std::mutex> g(m);
  shown.failures += 1;
  shown.last_error = error;
  if (!shown.failing) {
    shown.failing = true;
    shown.failing_since = iso_from_epoch(now);
    spdlog::warn("notify: {} ({}) failed: {}; retrying", r.name, shown_url(r.url), error);
  }
  if (generation != gen) return now;  // reloaded meanwhile: tried again at once, with the new settings
  failures_in_row += 1;
  const double delay = std::min(c.retry_max_seconds, std::pow(2.0, std::min(failures_in_row - 1, 20)));
  next_try = now + delay;
  return std::min(wake, next_try);
}

Notifier::Notifier(std::string journal, NotifyConfig cfg, std::string host, std::function<void()> changed)
    : journal_(std::move(journal)), host_(std::move(host)), changed_(std::move(changed)), cfg_(std::move(cfg)) {}

Notifier::~Notifier() {
  std::lock_guard<std::mutex> g(mutex_);
  for (auto& [name, s] : senders_) s->stop();
  for (auto& s : retired_) s->stop();
  senders_.clear();  // each joins its thread: at most one delivery's timeout (10 s)
  retired_.clear();
}

std::string Notifier::add_sender(const NotifyReceiver& r) {
  std::string error;
  auto outbox = NotifyOutbox::open(journal_, error);
  if (!outbox) return error;
  auto s = std::make_unique<Sender>(r, cfg_, std::move(outbox), host_, changed_);
  s->start();
  senders_[r.name] = std::move(s);
  return "";
}

std::string Notifier::start() {
  std::string error;
  adder_ = NotifyOutbox::open(journal_, error);
  if (!adder_) return error;
  std::vector<std::string> names;
  for (const NotifyReceiver& r : cfg_.receivers) names.push_back(r.name);
  adder_->drop_unconfigured(names);  // what receivers no longer configured had left
  std::lock_guard<std::mutex> g(mutex_);
  for (const NotifyReceiver& r : cfg_.receivers)
    if (std::string e = add_sender(r); !e.empty()) return e;
  return "";
}

bool Notifier::notify(const NotifyEvent& e) {
  std::vector<std::pair<std::string, int>> to;
  {
    std::lock_guard<std::mutex> g(mutex_);
    for (const NotifyReceiver& r : cfg_.receivers)
      if (receiver_wants(r, e)) to.push_back({r.name, r.max_pending});
  }
  if (to.empty() || !adder_) return true;
  std::map<std::string, long long> dropped;
  if (!adder_->add(e, to, epoch_now(), dropped)) {
    spdlog::error("notification '{}' not kept: {}", e.title, adder_->error());
    return false;
  }
  std::lock_guard<std::mutex> g(mutex_);
  for (const auto& [name, n] : dropped) {
    spdlog::warn("notify: {} has more than its max-pending undelivered messages: its {} oldest dropped", name, n);
    if (auto it = senders_.find(name); it != senders_.end()) it->second->count_dropped(n);
  }
  for (const auto& [name, max] : to)
    if (auto it = senders_.find(name); it != senders_.end()) it->second->poke();
  return true;
}

void Notifier::reconfigure(NotifyConfig cfg) {
  std::lock_guard<std::mutex> g(mutex_);
  // Senders that finished their last delivery since an earlier reload are joined now (never waited for here).
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(), [](const std::unique_ptr<Sender>& s) { return s->done.load(); }),
                 retired_.end());
  std::map<std::string, std::unique_ptr<Sender>> kept;
  cfg_ = std::move(cfg);
  for (const NotifyReceiver& r : cfg_.receivers) {
    if (auto it = senders_.find(r.name); it != senders_.end()) {
      it->second->reconfigure(r, cfg_);
      kept[r.name] = std::move(it->second);
      senders_.erase(it);
    }
  }
  for (auto& [name, s] : senders_) {  // removed: stops after what it is sending now
    s->stop();
    retired_.push_back(std::move(s));
  }
  senders_ = std::move(kept);
  for (const NotifyReceiver& r : cfg_.receivers)
    if (!senders_.count(r.name))
      if (std::string e = add_sender(r); !e.empty()) spdlog::error("notify: {}: {}", r.name, e);
  std::vector<std::string> names;
  for (const NotifyReceiver& r : cfg_.receivers) names.push_back(r.name);
  if (adder_) adder_->drop_unconfigured(names);  // pending events of removed receivers go
}

std::vector<ReceiverStatus> Notifier::status() const {
  std::lock_guard<std::mutex> g(mutex_);
  std::vector<ReceiverStatus> out;
  for (const NotifyReceiver& r : cfg_.receivers)
    if (auto it = senders_.find(r.name); it != senders_.end()) out.push_back(it->second->status());
  return out;
}

double Notifier::queue_stuck_minutes() const {
  std::lock_guard<std::mutex> g(mutex_);
  return cfg_.queue_stuck_minutes;
}

}  // namespace pto
