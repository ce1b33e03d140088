// The HTTP API of `pto-runner serve` (SPEC: Daemon). Routing, authentication and the read-only views; the
// mutations themselves are in daemon.cpp.
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "config/device_spec.h"
#include "exec/cgroup_tree.h"
#include "report/run_view.h"
#include "server/daemon.h"
#include "server/log_slice.h"
#include "util/json_text.h"

namespace pto {

namespace {

HttpResponse json_response(int status, const nlohmann::json& j) { return {status, "application/json", dump_json(j), {}}; }
const char* kUnauthorized = "missing or wrong bearer token (Authorization: Bearer <token from the token file>)";
HttpResponse not_found(const std::string& what) { return json_response(404, {{"error", what}}); }

}  // namespace

bool Daemon::authorized(const HttpRequest& req) const {
  const std::string prefix = "Bearer ";
  if (req.authorization.compare(0, prefix.size(), prefix) != 0) return false;
  std::string given = req.authorization.substr(prefix.size());
  // Constant time over the token's length; only the length can leak, and the token is 16+ random characters.
  if (given.size() != token_.size()) return false;
  return CRYPTO_memcmp(given.data(), token_.data(), token_.size()) == 0;
}

void Daemon::handle(const HttpRequest& req, HttpServer::Respond respond) {
  // Submissions and logs answer later (git, file reads on the workers); the rest is answered now.
  static const std::regex log_re("/api/v1/runs/([0-9]{8}-[0-9]{6}-[0-9a-f]{4})/steps/([^/]+)/log");
  std::smatch m;
  const bool get = req.method == "GET" || req.method == "HEAD";
  if (req.path == "/api/v1/runs" && req.method == "POST") {
    if (!authorized(req)) return respond(json_response(401, {{"error", kUnauthorized}}));
    return submit(req, std::move(respond));
  }
  if (get && std::regex_match(req.path, m, log_re)) return step_log(m[1], m[2], req, std::move(respond));
  if (req.path == "/api/v1/leases" && req.method == "POST") return lease_request(req, std::move(respond));
  respond(route(req));
}

HttpResponse Daemon::route(const HttpRequest& req) {
  static const std::regex run_re("/api/v1/runs/([0-9]{8}-[0-9]{6}-[0-9a-f]{4})");
  static const std::regex cancel_re("/api/v1/runs/([0-9]{8}-[0-9]{6}-[0-9a-f]{4})/cancel");
  static const std::regex log_re("/api/v1/runs/([0-9]{8}-[0-9]{6}-[0-9a-f]{4})/steps/([^/]+)/log");
  std::smatch m;
  const std::string& p = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto method_not_allowed = [] { return json_response(405, {{"error", "method not allowed"}}); };
  auto unauthorized = [] { return json_response(401, {{"error", kUnauthorized}}); };

  if (p == "/healthz") return get ? HttpResponse{200, "text/plain", "ok\n", {}} : method_not_allowed();
  if (p == "/metrics") return get ? metrics() : method_not_allowed();
  if (p == "/api/v1/status") return get ? status(req) : method_not_allowed();
  if (p == "/api/v1/runs") return get ? runs(req) : method_not_allowed();
  if (p == "/api/v1/leases") return get ? json_response(200, {{"leases", leases_json()}}) : method_not_allowed();
  static const std::regex lease_re("/api/v1/leases/(lease-[0-9a-f]{12})(/heartbeat)?");
  if (std::regex_match(p, m, lease_re)) {
    bool heartbeat = m[2].matched;
    if (heartbeat ? !post : req.method != "DELETE") return method_not_allowed();
    return lease_route(req, m[1], heartbeat ? "heartbeat" : "end");
  }
  static const std::regex device_re("/api/v1/devices/([0-9]{1,4})/(drain|undrain)");
  if (std::regex_match(p, m, device_re)) {
    if (!post) return method_not_allowed();
    if (!authorized(req)) return unauthorized();
    int card = std::stoi(m[1]);
    if (!pool_->has_card(card)) return not_found("no card " + std::string(m[1]));
    if (m[2] == "undrain") {
      bool changed = pool_->undrain(card);
      spdlog::info("card {} returned to service by request from {}", card, req.peer);
      dispatcher_->poke();
      status_cache_.clear();
      return json_response(200, {{"card", card}, {"state", "free"}, {"changed", changed}});
    }
    auto body = nlohmann::json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    std::string reason = body.is_object() && body.contains("reason") && body["reason"].is_string()
                             ? body["reason"].get<std::string>() : "drained by an operator";
    pool_->drain(card, reason);
    spdlog::warn("card {} drained by request from {}: {}", card, req.peer, reason);
    status_cache_.clear();
    return json_response(200, {{"card", card}, {"state", "drained"}, {"reason", reason}});
  }
  if (std::regex_match(p, m, cancel_re)) {
    if (!post) return method_not_allowed();
    if (!authorized(req)) return unauthorized();
    return cancel(m[1]);
  }
  if (std::regex_match(p, m, log_re)) return method_not_allowed();
  if (std::regex_match(p, m, run_re)) return get ? run(m[1]) : method_not_allowed();
  return not_found("no such endpoint: " + p);
}

HttpResponse Daemon::status(const HttpRequest& req) {
  const bool full = req.query.count("queue") && req.query.at("queue") == "all";
  auto now = std::chrono::steady_clock::now();
  if (!full && !status_cache_.empty() && now - status_cached_at_ < std::chrono::milliseconds(100))
    return {200, "application/json", status_cache_, {}};
  std::string body = dump_json(render_status(full));
  if (!full) {
    status_cache_ = body;
    status_cached_at_ = now;
  }
  return {200, "application/json", std::move(body), {}};
}

nlohmann::json Daemon::render_status(bool full_queue) {
  nlohmann::json j;
  j["version"] = PTO_RUNNER_VERSION;
  j["started"] = started_iso_;
  j["uptime_seconds"] = uptime();
  j["simulate"] = opts_.simulate;
  j["containment"] = CgroupTree::instance().available() ? "cgroup" : "process group + sweep";
  const auto& reserved = dispatcher_->reserved();
  // Holder labels are "job / step"; say which run too.
  std::map<std::string, std::string> run_of_label;
  for (const auto& [id, r] : active_)
    for (std::size_t k = 0; k < r->engine->plan().jobs.size(); ++k)
      for (const auto& s : r->engine->plan().jobs[k].steps) run_of_label[r->engine->plan().jobs[k].id + " / " + s.name] = id;
  for (const Lease* l : leases_->active())
    if (!l->request.run_id.empty()) run_of_label["lease " + l->id + ": " + l->request.label] = l->request.run_id;
  nlohmann::json devices = nlohmann::json::array();
  std::map<std::string, int> by_state;
  for (const auto& c : pool_->status(reserved)) {
    nlohmann::json d = {{"id", c.id}, {"state", to_string(c.state)}, {"since", c.since}, {"group", c.group},
                        {"type", c.type.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.type)}};
    if (c.state == CardState::Busy) {
      d["holder"] = {{"label", c.holder}, {"outside", c.held_outside}};
      // Locked by a program pto-runner does not run (the incumbent task-submit, a person's script): say so.
      if (c.held_outside)
        d["holder"]["label"] = "another program holds " + c.lock_file + " (" + c.holder + ")";
      if (auto it = run_of_label.find(c.holder); it != run_of_label.end()) d["holder"]["run"] = it->second;
    } else {
      d["holder"] = nullptr;
    }
    if (c.state == CardState::Reserved) d["reserved_for"] = reserved.at(c.id);
    d["drain_reason"] = c.drain_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.drain_reason);
    d["consecutive_infra_failures"] = c.consecutive_infra_failures;
    by_state[to_string(c.state)]++;
    devices.push_back(d);
  }
  j["devices"] = devices;
  j["devices_by_state"] = by_state;
  nlohmann::json queue = nlohmann::json::array();
  const auto entries = dispatcher_->queue();
  j["queue_total"] = entries.size();
  const std::size_t shown = full_queue ? entries.size() : std::min<std::size_t>(entries.size(), 50);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& q = entries[i];
    nlohmann::json e = {{"ticket", q.ticket}, {"step", q.label}, {"devices", q.devices}, {"reason", q.reason},
                        {"wait_seconds", q.waited_seconds}, {"since", q.since}};
    if (auto it = run_of_label.find(q.label); it != run_of_label.end()) e["run"] = it->second;
    queue.push_back(e);
  }
  j["queue"] = queue;
  j["leases"] = leases_json();
  nlohmann::json active = nlohmann::json::array();
  for (const auto& [id, r] : active_) {
    const RunRecord& rec = r->engine->record();
    int running = 0, waiting = 0, done = 0, total = 0;
    for (const auto& job : rec.jobs)
      for (const auto& s : job.steps) {
        ++total;
        running += s.state == StepState::Running;
        waiting += s.state == StepState::Waiting;
        done += is_final(s.state);
      }
    nlohmann::json a = {{"id", id}, {"created", rec.created}, {"state", rec.cancelled ? "cancelling" : "running"},
                        {"steps", total}, {"steps_finished", done}, {"steps_running", running}, {"steps_waiting", waiting},
                        {"url", "/api/v1/runs/" + id}, {"sha", r->request.value("sha", "")}, {"ref", r->request.value("ref", "")}};
    // The Actions run that submitted it, for an on-call engineer to follow back.
    if (r->request.contains("github") && r->request["github"].contains("run_url")) a["github_run"] = r->request["github"]["run_url"];
    active.push_back(std::move(a));
  }
  j["active_runs"] = active;
  j["toolchain"] = {{"pin", {{"version", toolchain_.version}, {"sha256", toolchain_.sha256}}},
                    {"state", toolchain_.state},
                    {"root", toolchain_.root.empty() ? nlohmann::json(nullptr) : nlohmann::json(toolchain_.root)},
                    {"bin", toolchain_.bin.empty() ? nlohmann::json(nullptr) : nlohmann::json(toolchain_.bin)},
                    {"last_verified", toolchain_.last_verified.empty() ? nlohmann::json(nullptr) : nlohmann::json(toolchain_.last_verified)},
                    {"error", toolchain_.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(toolchain_.error)},
                    {"run", toolchain_.run.empty() ? nlohmann::json(nullptr) : nlohmann::json(toolchain_.run)}};
  if (toolchain_.version.empty()) {
    // Before any lead job ran, show the pin the definitions ask for.
    Diagnostics d;
    VersionsEnv pin = load_versions_env(opts_.load.root + "/toolchain/versions.env", "toolchain/versions.env", d);
    j["toolchain"]["pin"] = {{"version", pin.ptoas_version}, {"sha256", pin.sha256_for(host_arch())}};
  }
  auto counts = journal_->runs_by_state();
  counts["running"] = static_cast<int>(active_.size());
  j["runs_by_result"] = counts;
  return j;
}

HttpResponse Daemon::runs(const HttpRequest& req) {
  int limit = 50;
  if (auto it = req.query.find("limit"); it != req.query.end()) {
    char* end = nullptr;
    long n = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || n < 1 || n > 1000) return json_response(400, {{"error", "limit must be 1-1000"}});
    limit = static_cast<int>(n);
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [id, r] : active_)
    out.push_back({{"id", id}, {"state", "running"}, {"created", r->engine->record().created}, {"finished", nullptr},
                   {"result", nullptr}, {"request", r->request}});
  for (const auto& [id, r] : unjournaled_)
    out.push_back({{"id", id}, {"state", r.value("state", "")}, {"created", r.value("created", "")}, {"finished", r["finished"]},
                   {"result", r["result"]}, {"request", r.value("request", nlohmann::json::object())}});
  for (const auto& s : journal_->list_runs(limit)) {
    if (active_.count(s.id)) continue;
    out.push_back({{"id", s.id}, {"state", s.state}, {"created", s.created},
                   {"finished", s.finished.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.finished)},
                   {"result", s.result >= 0 ? nlohmann::json(s.result) : nlohmann::json(nullptr)}, {"request", s.request}});
  }
  return json_response(200, {{"runs", out}});
}

HttpResponse Daemon::run(const std::string& id) {
  if (auto it = active_.find(id); it != active_.end()) {
    const RunEngine& e = *it->second->engine;
    nlohmann::json j = run_to_json(e.record(), e.plan(), e.record().cancelled ? "cancelling" : "running", -1, e.now());
    // Waiting reasons live in the dispatcher; fill them in for the steps that wait (one pass over the queue).
    std::map<std::uint64_t, std::string> reasons;
    for (auto& q : dispatcher_->queue()) reasons[q.ticket] = std::move(q.reason);
    for (std::size_t k = 0; k < e.plan().jobs.size(); ++k)
      for (std::size_t s = 0; s < e.plan().jobs[k].steps.size(); ++s) {
        const StepRecord& sr = e.record().jobs[k].steps[s];
        if (sr.state == StepState::Waiting && reasons.count(sr.ticket)) j["jobs"][k]["steps"][s]["wait_reason"] = reasons[sr.ticket];
      }
    j["request"] = it->second->request;
    return json_response(200, j);
  }
  if (auto u = unjournaled_.find(id); u != unjournaled_.end()) return json_response(200, u->second);
  auto rec = journal_->run_record(id);
  if (!rec) return not_found("no run " + id);
  return json_response(200, *rec);
}

void Daemon::step_log(const std::string& id, const std::string& step, const HttpRequest& req, HttpServer::Respond respond) {
  static const std::regex step_re("([0-9]{1,6})-([0-9]{1,6})");
  std::smatch m;
  if (!std::regex_match(step, m, step_re)) return respond(not_found("no step '" + step + "' (step ids look like 3-9)"));
  // ?tail=N lines (default 200) from the end, or ?offset=N[&bytes=M] for paging and following; either way one
  // read of at most 1 MiB, on a worker thread.
  auto number = [&](const char* key, std::uint64_t lo, std::uint64_t hi, std::optional<std::uint64_t>& out) {
    auto it = req.query.find(key);
    if (it == req.query.end()) return true;
    char* end = nullptr;
    unsigned long long n = std::strtoull(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || it->second[0] == '-' || n < lo || n > hi) return false;
    out = n;
    return true;
  };
  std::optional<std::uint64_t> tail, offset, bytes;
  if (!number("tail", 1, 100000, tail)) return respond(json_response(400, {{"error", "tail must be 1-100000"}}));
  if (!number("offset", 0, UINT64_MAX / 2, offset))
    return respond(json_response(400, {{"error", "offset must be a byte offset >= 0"}}));
  if (!number("bytes", 1, kMaxLogRead, bytes))
    return respond(json_response(400, {{"error", "bytes must be 1-" + std::to_string(kMaxLogRead)}}));
  if (tail && offset) return respond(json_response(400, {{"error", "give tail or offset, not both"}}));
  // The path comes from the run's own record, never from the URL.
  std::string log_path;
  std::size_t job = std::stoul(m[1]) - 1, st = std::stoul(m[2]) - 1;
  if (auto it = active_.find(id); it != active_.end()) {
    const auto& rec = it->second->engine->record();
    if (job < rec.jobs.size() && st < rec.jobs[job].steps.size()) log_path = rec.jobs[job].steps[st].log_path;
    else return respond(not_found("no step " + step + " in run " + id));
  } else {
    auto u = unjournaled_.find(id);
    auto rec = u != unjournaled_.end() ? std::optional<nlohmann::json>(u->second) : journal_->run_record(id);
    if (!rec) return respond(not_found("no run " + id));
    const auto& jobs = (*rec)["jobs"];
    if (job >= jobs.size() || st >= jobs[job]["steps"].size()) return respond(not_found("no step " + step + " in run " + id));
    log_path = jobs[job]["steps"][st].value("log_path", "");
  }
  if (log_path.empty()) return respond(not_found("step " + step + " has no log yet"));
  boost::asio::post(*workers_, [log_path, step, tail, offset, bytes, respond] {
    LogSlice s = offset ? read_log_range(log_path, *offset, bytes.value_or(64 * 1024))
                        : read_log_tail(log_path, tail.value_or(200), bytes.value_or(kMaxLogRead));
    if (!s.error.empty()) return respond(not_found("the log of step " + step + " cannot be read: " + s.error));
    // The executor creates the file on the step's first output: a started step without one printed nothing.
    HttpResponse r{200, "text/plain; charset=utf-8", std::move(s.data), {}};
    r.headers = {{"X-Log-Size", std::to_string(s.size)}, {"X-Log-Start", std::to_string(s.start)},
                 {"X-Log-End", std::to_string(s.end)}};
    respond(std::move(r));
  });
}

HttpResponse Daemon::metrics() {
  std::string out;
  out += "# HELP pto_runner_cards NPU cards by state\n# TYPE pto_runner_cards gauge\n";
  std::map<std::string, int> by_state = {{"free", 0}, {"busy", 0}, {"reserved", 0}, {"drained", 0}};
  for (const auto& c : pool_->status(dispatcher_->reserved())) by_state[to_string(c.state)]++;
  for (const auto& [s, n] : by_state) out += "pto_runner_cards{state=\"" + s + "\"} " + std::to_string(n) + "\n";
  out += "# HELP pto_runner_queue_depth Steps waiting for cards\n# TYPE pto_runner_queue_depth gauge\n";
  out += "pto_runner_queue_depth " + std::to_string(dispatcher_->queue().size()) + "\n";
  std::size_t granted = leases_->granted_count(), waiting = leases_->active().size() - granted;
  out += "# HELP pto_runner_leases Card leases (task-submit) by state\n# TYPE pto_runner_leases gauge\n";
  out += "pto_runner_leases{state=\"waiting\"} " + std::to_string(waiting) + "\npto_runner_leases{state=\"granted\"} " +
         std::to_string(granted) + "\n";
  out += "# HELP pto_runner_leases_ended_total Card leases ended, by how\n# TYPE pto_runner_leases_ended_total counter\n";
  for (const auto& [reason, n] : leases_->ended_by_reason())
    out += "pto_runner_leases_ended_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  out += "# HELP pto_runner_active_runs Runs in progress\n# TYPE pto_runner_active_runs gauge\n";
  out += "pto_runner_active_runs " + std::to_string(active_.size()) + "\n";
  metrics_.wait_seconds.render(out, "pto_runner_wait_seconds", "Time from runnable to started");
  metrics_.step_seconds.render(out, "pto_runner_step_duration_seconds", "Time from started to finished");
  out += "# HELP pto_runner_steps_total Finished steps by result\n# TYPE pto_runner_steps_total counter\n";
  for (const auto& [r, n] : metrics_.steps_by_result)
    out += "pto_runner_steps_total{result=\"" + r + "\"} " + std::to_string(n) + "\n";
  out += "# HELP pto_runner_runs_total Finished runs by result since start\n# TYPE pto_runner_runs_total counter\n";
  for (const auto& [r, n] : metrics_.runs_by_result)
    out += "pto_runner_runs_total{result=\"" + r + "\"} " + std::to_string(n) + "\n";
  out += "# HELP pto_runner_uptime_seconds Seconds since the daemon started\n# TYPE pto_runner_uptime_seconds gauge\n";
  out += "pto_runner_uptime_seconds " + std::to_string(uptime()) + "\n";
  return {200, "text/plain; version=0.0.4", out, {}};
}

}  // namespace pto
