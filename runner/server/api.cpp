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
#include "server/status_json.h"
#include "report/run_view.h"
#include "server/daemon.h"
#include "server/log_slice.h"
#include "util/json_text.h"
#include "util/regular_file.h"

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

namespace {
bool is_run_id(const std::string& s) {
  static const std::regex re("[0-9]{8}-[0-9]{6}-[0-9a-f]{4}");
  return std::regex_match(s, re);
}
}  // namespace

void Daemon::handle(const HttpRequest& req, HttpServer::Respond respond) {
  // Submissions, logs and finished runs' records answer later (git, file reads on the workers); the rest now.
  const auto& seg = req.segments;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool api = seg.size() >= 3 && seg[0] == "api" && seg[1] == "v1";
  if (api && seg.size() == 3 && seg[2] == "runs" && req.method == "POST") {
    if (!authorized(req)) return respond(json_response(401, {{"error", kUnauthorized}}));
    return submit(req, std::move(respond));
  }
  if (api && get && seg.size() == 7 && seg[2] == "runs" && is_run_id(seg[3]) && seg[4] == "steps" && seg[6] == "log")
    return step_log(seg[3], seg[5], req, std::move(respond));
  if (api && get && seg.size() == 4 && seg[2] == "runs" && is_run_id(seg[3])) return run(seg[3], std::move(respond));
  if (api && seg.size() == 3 && seg[2] == "leases" && req.method == "POST") return lease_request(req, std::move(respond));
  respond(route(req));
}

HttpResponse Daemon::route(const HttpRequest& req) {
  const auto& seg = req.segments;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto method_not_allowed = [] { return json_response(405, {{"error", "method not allowed"}}); };
  auto unauthorized = [] { return json_response(401, {{"error", kUnauthorized}}); };
  auto is = [&](std::initializer_list<const char*> want) {
    if (seg.size() != want.size()) return false;
    std::size_t i = 0;
    for (const char* w : want) {
      if (*w != '*' && seg[i] != w) return false;
      ++i;
    }
    return true;
  };

  if (seg.empty()) return get ? page() : method_not_allowed();
  if (is({"healthz"})) return get ? HttpResponse{200, "text/plain", "ok\n", {}} : method_not_allowed();
  if (is({"metrics"})) return get ? HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", render_metrics(view_, metrics_, uptime()), {}}
                                  : method_not_allowed();
  if (is({"api", "v1", "status"})) return get ? status(req) : method_not_allowed();
  if (is({"api", "v1", "runs"})) return get ? runs(req) : method_not_allowed();
  if (is({"api", "v1", "leases"})) return get ? json_response(200, {{"leases", view_.leases}}) : method_not_allowed();
  static const std::regex lease_id("lease-[0-9a-f]{12}");
  if ((is({"api", "v1", "leases", "*"}) || is({"api", "v1", "leases", "*", "heartbeat"})) && std::regex_match(seg[3], lease_id)) {
    bool heartbeat = seg.size() == 5;
    if (heartbeat ? !post : req.method != "DELETE") return method_not_allowed();
    return lease_route(req, seg[3], heartbeat ? "heartbeat" : "end");
  }
  static const std::regex card_id("[0-9]{1,4}");
  if (is({"api", "v1", "devices", "*", "*"}) && std::regex_match(seg[3], card_id) && (seg[4] == "drain" || seg[4] == "undrain")) {
    if (!post) return method_not_allowed();
    if (!authorized(req)) return unauthorized();
    if (host_->slurm)
      return json_response(409, {{"error", "under executor: slurm the cards are Slurm's, and Slurm drains nodes: "
                                           "POST /api/v1/nodes/NODE/drain (pto-runner devices --drain-node NODE)"}});
    int card = std::stoi(seg[3]);
    if (!pool_->has_card(card)) return not_found("no card " + seg[3]);
    if (seg[4] == "undrain") {
      bool changed = pool_->undrain(card);
      spdlog::info("card {} returned to service by request from {}", card, req.peer);
      dispatcher_->poke();
      refresh_view();  // a client's own change is in the status it reads next
      return json_response(200, {{"card", card}, {"state", "free"}, {"changed", changed}});
    }
    auto body = nlohmann::json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    std::string reason = body.is_object() && body.contains("reason") && body["reason"].is_string()
                             ? body["reason"].get<std::string>() : "drained by an operator";
    pool_->drain(card, reason);
    spdlog::warn("card {} drained by request from {}: {}", card, req.peer, reason);
    refresh_view();
    return json_response(200, {{"card", card}, {"state", "drained"}, {"reason", reason}});
  }
  static const std::regex node_name("[A-Za-z0-9._-]{1,64}");
  if (is({"api", "v1", "nodes", "*", "*"}) && std::regex_match(seg[3], node_name) && (seg[4] == "drain" || seg[4] == "undrain")) {
    if (!post) return method_not_allowed();
    if (!authorized(req)) return unauthorized();
    return drain_node(req, seg[3], seg[4] == "drain");
  }
  if (is({"api", "v1", "runs", "*", "cancel"}) && is_run_id(seg[3])) {
    if (!post) return method_not_allowed();
    if (!authorized(req)) return unauthorized();
    return cancel(seg[3]);
  }
  if ((is({"api", "v1", "runs", "*", "steps", "*", "log"}) || is({"api", "v1", "runs", "*"})) && is_run_id(seg[3]))
    return method_not_allowed();
  return not_found("no such endpoint: " + req.path);
}

HttpResponse Daemon::drain_node(const HttpRequest& req, const std::string& node, bool drain) {
  if (!host_->slurm)
    return json_response(409, {{"error", "nodes are Slurm's: this daemon runs executor: local; drain a card with /api/v1/devices/ID/drain"}});
  auto body = nlohmann::json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  std::string reason = body.is_object() && body.contains("reason") && body["reason"].is_string()
                           ? body["reason"].get<std::string>() : "drained by an operator";
  // Slurm's own drain, on this thread (an operator's rare action; bounded at 10 s).
  SlurmCommandResult r = host_->slurm->set_node_drained(node, drain, reason);
  if (!r.ok()) return json_response(r.error.empty() ? 400 : 503, {{"error", "scontrol: " + r.why()}});
  spdlog::warn("Slurm node {} {} by request from {}{}", node, drain ? "drained" : "resumed", req.peer, drain ? ": " + reason : "");
  return json_response(200, {{"node", node}, {"state", drain ? "drain" : "resume"}, {"reason", drain ? reason : ""}});
}

HttpResponse Daemon::status(const HttpRequest& req) {
  const bool full = req.query.count("queue") && req.query.at("queue") == "all";
  return {200, "application/json", status_body(full), {}};
}

HttpResponse Daemon::runs(const HttpRequest& req) {
  std::size_t limit = 50;
  if (auto it = req.query.find("limit"); it != req.query.end()) {
    char* end = nullptr;
    long n = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || n < 1 || n > static_cast<long>(kRecentRuns))
      return json_response(400, {{"error", "limit must be 1-" + std::to_string(kRecentRuns)}});
    limit = static_cast<std::size_t>(n);
  }
  nlohmann::json out = nlohmann::json::array();
  auto line = [](const RunOverview& r) {
    return nlohmann::json{{"id", r.id}, {"state", r.state}, {"created", r.created},
                          {"finished", r.finished.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.finished)},
                          {"result", r.result >= 0 ? nlohmann::json(r.result) : nlohmann::json(nullptr)},
                          {"request", r.request}};
  };
  // Active runs as the engine has them now (a run is in exactly one of the two lists, never both).
  for (const auto& [id, r] : active_) out.push_back(line(overview_of(id, *r)));
  for (std::size_t i = 0; i < view_.recent.size() && out.size() < limit + active_.size(); ++i) out.push_back(line(view_.recent[i]));
  return json_response(200, {{"runs", out}});
}

void Daemon::run(const std::string& id, HttpServer::Respond respond) {
  if (auto it = active_.find(id); it != active_.end()) {
    const RunEngine& e = *it->second->engine;
    nlohmann::json j = run_to_json(e.record(), e.plan(), e.record().cancelled ? "cancelling" : "running", -1, e.now());
    // Waiting reasons are the read model's (refreshed after transitions), never computed for a GET.
    std::map<std::uint64_t, const QueueView*> waiting;
    for (const auto& q : view_.queue) waiting[q.ticket] = &q;
    for (std::size_t k = 0; k < e.plan().jobs.size(); ++k)
      for (std::size_t s = 0; s < e.plan().jobs[k].steps.size(); ++s) {
        const StepRecord& sr = e.record().jobs[k].steps[s];
        if (sr.state == StepState::Waiting && waiting.count(sr.ticket)) j["jobs"][k]["steps"][s]["wait_reason"] = waiting[sr.ticket]->reason;
      }
    j["request"] = it->second->request;
    return respond(json_response(200, j));
  }
  run_read(id);
  if (auto u = unjournaled_.find(id); u != unjournaled_.end()) return respond(json_response(200, u->second));
  // A finished run's record is the run.json beside its logs, read on a worker; the journal only for a run
  // older than run.json (on this thread, where the journal lives).
  const std::string path = state_dir_ + "/runs/" + id + "/run.json";
  boost::asio::post(*workers_, [this, id, path, respond] {
    std::string text, error;
    bool read = read_regular_file(path, 64 << 20, text, error);
    auto record = read ? nlohmann::json::parse(text, nullptr, false) : nlohmann::json();
    if (read && record.is_object() && record.value("state", "") != "running")
      return respond(HttpResponse{200, "application/json", std::move(text), {}});
    boost::asio::post(io_, [this, id, respond] {
      auto rec = journal_->run_record(id);
      if (!rec && !journal_->read_error().empty()) return respond(json_response(503, {{"error", "the journal cannot be read now: " + journal_->read_error()}}));
      respond(rec ? json_response(200, *rec) : not_found("no run " + id));
    });
  });
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
  std::size_t job = std::stoul(m[1]) - 1, st = std::stoul(m[2]) - 1;
  auto serve = [this, step, tail, offset, bytes, respond](const std::string& log_path) {
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
  };
  auto from_record = [this, id, step, job, st, respond, serve](const nlohmann::json& rec) {
    const auto& jobs = rec["jobs"];
    if (!jobs.is_array() || job >= jobs.size() || st >= jobs[job]["steps"].size())
      return respond(not_found("no step " + step + " in run " + id));
    serve(jobs[job]["steps"][st].value("log_path", ""));
  };
  if (auto it = active_.find(id); it != active_.end()) {
    const auto& rec = it->second->engine->record();
    if (job < rec.jobs.size() && st < rec.jobs[job].steps.size()) return serve(rec.jobs[job].steps[st].log_path);
    return respond(not_found("no step " + step + " in run " + id));
  }
  if (auto u = unjournaled_.find(id); u != unjournaled_.end()) return from_record(u->second);
  // A finished run: its run.json, read on a worker (the journal only for a run older than run.json).
  boost::asio::post(*workers_, [this, id, respond, from_record] {
    std::string text, error;
    nlohmann::json rec;
    if (read_regular_file(state_dir_ + "/runs/" + id + "/run.json", 64 << 20, text, error))
      rec = nlohmann::json::parse(text, nullptr, false);
    boost::asio::post(io_, [this, id, respond, from_record, rec = std::move(rec)] {
      if (rec.is_object() && rec.value("state", "") != "running") return from_record(rec);
      auto j = journal_->run_record(id);
      if (!j && !journal_->read_error().empty()) return respond(json_response(503, {{"error", "the journal cannot be read now: " + journal_->read_error()}}));
      if (!j) return respond(not_found("no run " + id));
      from_record(*j);
    });
  });
}

}  // namespace pto
