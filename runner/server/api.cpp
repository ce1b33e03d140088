#include "server/api.h"

#include "report/junit_report.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdlib>
#include <regex>

#include "engine/engine.h"
#include "report/run_view.h"
#include "server/http_responses.h"
#include "server/log_slice.h"
#include "server/metrics.h"
#include "server/status_json.h"
#include "server/run_page.h"
#include "server/run_changes.h"
#include "server/cards_page.h"
#include "server/status_page.h"
#include "server/tests_page.h"
#include "server/perf_page.h"
#include "testcases/mutes.h"
#include "server/bisection_page.h"
#include "util/api_paths.h"
#include "util/ids.h"
#include "util/json_text.h"
#include "util/regular_file.h"
#include "util/state_paths.h"
#include "util/clock.h"

namespace pto {

namespace {

HttpResponse not_found(const std::string& what) { return error_response(404, what); }
HttpResponse method_not_allowed() { return error_response(405, "method not allowed"); }

bool is_card_id(const std::string& s) {
  static const std::regex re("[0-9]{1,4}");
  return std::regex_match(s, re);
}
bool is_node_name(const std::string& s) {
  static const std::regex re("[A-Za-z0-9._-]{1,64}");
  return std::regex_match(s, re);
}

/// Whether `seg` is the path `path` (an api_path constant) followed by `more` ("*": any one segment), or with
/// `prefix`, starts with `path`.
bool path_is(const std::vector<std::string>& seg, const char* path, std::initializer_list<const char*> more, bool prefix = false) {
  std::size_t i = 0;
  for (std::string_view rest(path); !rest.empty();) {
    rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of('/')));
    if (rest.empty()) break;
    const std::size_t end = std::min(rest.size(), rest.find('/'));
    if (i >= seg.size() || seg[i] != rest.substr(0, end)) return false;
    ++i;
    rest.remove_prefix(end);
  }
  if (prefix) return true;
  if (seg.size() != i + more.size()) return false;
  for (const char* w : more) {
    if (*w != '*' && seg[i] != w) return false;
    ++i;
  }
  return true;
}

/// A bisection's id as the daemon makes them: "bisect-" and a run id's shape.
bool is_bisection_id(const std::string& s) {
  return s.size() > 7 && s.size() < 64 && s.rfind("bisect-", 0) == 0 &&
         std::all_of(s.begin() + 7, s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

constexpr auto kStatusReuse = std::chrono::milliseconds(100);  // the rendered JSON, for its uptime field

}  // namespace

HttpResponse to_http(const Answer& a) { return json_response(static_cast<int>(a.outcome), a.body); }

Api::Api(boost::asio::io_context& io, boost::asio::thread_pool* workers, const ReadModel& model, HostCommands& commands,
         const Access& access, ApiOptions options)
    : io_(io), workers_(workers), model_(model), commands_(commands), access_(access), options_(std::move(options)) {}

void Api::handle(const HttpRequest& req, HttpServer::Respond respond) {
  const Caller caller = access_.identify(req);
  // A client past its connection cap gets only what must get through whatever another client does: the
  // probe, the admin, a running step's leases (SPEC: one client cannot lock out the others).
  if (req.over_cap && !path_is(req.segments, api_path::kHealthz, {}) && caller.role != Caller::Role::Admin &&
      caller.role != Caller::Role::Run)
    return respond(error_response(503, "too many connections from this client (max-connections-per-client): close some and retry"));
  if (options_.leases_only && caller.role == Caller::Role::Anonymous)
    return respond(error_response(401, access_.refusal(Action::Lease)));
  // What a command changed is kept before its answer goes out (the journal commits a turn's writes together).
  respond = [this, respond = std::move(respond)](HttpResponse r) {
    commands_.durable();
    respond(std::move(r));
  };
  // A rendering that throws (a record it did not expect) answers 500 for that request; the daemon goes on.
  HttpServer::Respond fallback = respond;
  try {
    route(req, caller, std::move(respond));
  } catch (const std::exception& e) {
    fallback(error_response(500, std::string("internal error answering ") + req.path + ": " + e.what()));
  }
}

// The one route table. Each route: its method (405 otherwise), who may call it (401), then what it does.
void Api::route(const HttpRequest& req, const Caller& caller, HttpServer::Respond respond) {
  const auto& seg = req.segments;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto is = [&](const char* path, std::initializer_list<const char*> more = {}) { return path_is(seg, path, more); };
  auto allowed = [&](Action a, int owner_uid = -1) {
    if (access_.permits(caller, a, owner_uid)) return true;
    respond(error_response(access_.refusal_status(caller), access_.refusal(caller, a)));
    return false;
  };
  // A GET anyone who may read may make (405 for another method).
  auto read = [&](auto&& answer) {
    if (!get) return respond(method_not_allowed());
    if (allowed(Action::Read)) answer();
  };
  if (path_is(seg, api_path::kLeases, {}, true)) return leases(req, caller, std::move(respond));
  if (options_.leases_only)
    return respond(not_found("no such endpoint: " + req.path + (options_.leases_only_note.empty() ? "" : " (" + options_.leases_only_note + ")")));

  if (is(api_path::kStatusPage)) {
    return read([&] { respond(render_status_page()); });
  }
  if (is(api_path::kRunPages, {"*"}) && is_run_id(seg[1])) {  // a run's page: its script reads the run's JSON
    return read([&] { respond(render_run_page()); });
  }
  if (is(api_path::kCardsPage)) {
    return read([&] { respond(render_cards_page()); });
  }
  if (is(api_path::kCards)) {
    return read([&] { respond(json_response(200, cards_json())); });
  }
  if (is(api_path::kTestsPage)) {
    return read([&] { respond(render_tests_page()); });
  }
  if (is(api_path::kTests)) {
    return read([&] { tests(req, std::move(respond)); });
  }
  if (is(api_path::kPerfPage)) {
    return read([&] { respond(render_perf_page()); });
  }
  if (is(api_path::kPerf)) {
    return read([&] { perf(req, std::move(respond)); });
  }
  if (post && (is(api_path::kTests, {"mute"}) || is(api_path::kTests, {"unmute"}))) {
    if (!allowed(Action::MuteTest)) return;
    if (seg[3] == "mute") {
      TestMute m;
      if (auto bad = parse_test_mute(req.body, utc_date(), m)) return respond(json_response(400, bad->json()));
      return respond(to_http(commands_.mute_test(m, caller)));
    }
    std::string glob;
    if (auto bad = parse_test_unmute(req.body, glob)) return respond(json_response(400, bad->json()));
    return respond(to_http(commands_.unmute_test(glob, caller)));
  }
  if (is(api_path::kTests, {"*"})) {
    return read([&] { test(seg[3], req, std::move(respond)); });
  }
  if (is(api_path::kBisectionPages, {"*"}) && is_bisection_id(seg[1])) {
    return read([&] { respond(render_bisection_page()); });
  }
  if (is(api_path::kBisections)) {
    if (post) {
      if (!allowed(Action::Bisect)) return;
      BisectSpec spec;
      if (auto bad = parse_bisection(req.body, spec)) return respond(json_response(400, bad->json()));
      return commands_.start_bisection(std::move(spec), caller, [respond](Answer a) { respond(to_http(a)); });
    }
    return read([&] {
      nlohmann::json list = nlohmann::json::array();
      for (const nlohmann::json& b : model_.bisections)
        list.push_back({{"id", b["id"]}, {"state", b["state"]}, {"spec", b["spec"]}, {"culprit", b["culprit"]}, {"error", b["error"]},
                        {"runs_used", b["runs_used"]}, {"created", b.value("created", "")}, {"finished", b.value("finished", nlohmann::json())},
                        {"url", api_path::bisection(b["id"].get<std::string>())}});
      respond(json_response(200, {{"bisections", list}}));
    });
  }
  if (is(api_path::kBisections, {"*"}) && is_bisection_id(seg[3])) {
    return read([&] {
      for (const nlohmann::json& b : model_.bisections)
        if (b["id"] == seg[3]) return respond(json_response(200, b));
      respond(not_found("no bisection " + seg[3]));
    });
  }
  if (is(api_path::kBisections, {"*", "cancel"}) && is_bisection_id(seg[3])) {
    if (!post) return respond(method_not_allowed());
    if (allowed(Action::Bisect)) respond(to_http(commands_.cancel_bisection(seg[3], caller)));
    return;
  }
  if (is(api_path::kHealthz)) return respond(get ? HttpResponse{200, "text/plain", "ok\n", {}} : method_not_allowed());
  if (is(api_path::kMetrics)) {
    if (!get) return respond(method_not_allowed());
    if (allowed(Action::Read))
      respond({200, "text/plain; version=0.0.4; charset=utf-8", render_metrics(model_.host, model_.metrics, model_.uptime()), {}});
    return;
  }
  if (is(api_path::kStatus)) {
    return read([&] { respond(status(req)); });
  }
  if (is(api_path::kRuns)) {
    if (post) {
      if (!allowed(Action::SubmitRun)) return;
      RunSubmission s;
      if (auto bad = parse_run_submission(req.body, s)) return respond(json_response(400, bad->json()));
      if (caller.role == Caller::Role::Submitter) s.submitter = {{"uid", caller.uid}, {"user", caller.user}};  // never from the body
      return commands_.submit_run(std::move(s), caller, [respond](Answer a) { respond(to_http(a)); });
    }
    return read([&] { respond(runs(req)); });
  }
  if (is(api_path::kRuns, {"*"}) && is_run_id(seg[3])) {
    return read([&] { run(seg[3], req, std::move(respond)); });
  }
  if ((is(api_path::kRuns, {"*", "tests"}) || is(api_path::kRuns, {"*", "junit.xml"})) && is_run_id(seg[3])) {
    if (!get) return respond(method_not_allowed());
    if (!allowed(Action::Read)) return;
    const bool junit = seg[4] == "junit.xml";
    auto it = req.query.find("result");
    if (!junit && it != req.query.end() && it->second != "failed") return respond(error_response(400, "result may only be 'failed'"));
    const bool failed_only = !junit && it != req.query.end();
    return run_json(seg[3], respond, [respond, junit, failed_only](const nlohmann::json& run) {
      if (junit) return respond({200, "application/xml; charset=utf-8", junit_report(run), {}});
      respond(json_response(200, run_tests_json(run, failed_only)));
    });
  }
  if (is(api_path::kRuns, {"*", "cancel"}) && is_run_id(seg[3])) {
    if (!post) return respond(method_not_allowed());
    // A local submitter's own runs only: who submitted an active run is in its request.
    int owner = -1;
    if (auto it = model_.active.find(seg[3]); it != model_.active.end() && it->second.request) {
      const nlohmann::json& by = it->second.request->value("submitter", nlohmann::json::object());
      if (by.is_object() && by.contains("uid") && by["uid"].is_number_integer()) owner = by["uid"].get<int>();
    }
    if (allowed(Action::CancelRun, owner)) respond(to_http(commands_.cancel_run(seg[3], caller)));
    return;
  }
  if (is(api_path::kRuns, {"*", "detach"}) && is_run_id(seg[3])) {
    if (!post) return respond(method_not_allowed());
    if (!allowed(Action::SubmitRun)) return;  // the client id it was given is what names it
    std::string client;
    bool cancel = false;
    if (auto bad = parse_detach(req.body, client, cancel)) return respond(json_response(400, bad->json()));
    return respond(to_http(commands_.detach_client(seg[3], client, cancel, caller)));
  }
  if (is(api_path::kRuns, {"*", "steps", "*", "log"}) && is_run_id(seg[3])) {
    return read([&] { step_log(seg[3], seg[5], req, std::move(respond)); });
  }
  const bool drain_route = seg.size() == 5 && (seg[4] == "drain" || seg[4] == "undrain");
  if (drain_route && is(api_path::kDevices, {"*", "*"}) && is_card_id(seg[3])) {
    if (!post) return respond(method_not_allowed());
    if (allowed(Action::ChangeCard))
      respond(to_http(commands_.change_card(std::stoi(seg[3]), seg[4] == "drain", drain_reason_of(req.body), caller)));
    return;
  }
  if (drain_route && is(api_path::kNodes, {"*", "*"}) && is_node_name(seg[3])) {
    if (!post) return respond(method_not_allowed());
    if (allowed(Action::ChangeCard))
      respond(to_http(commands_.change_node(seg[3], seg[4] == "drain", drain_reason_of(req.body), caller)));
    return;
  }
  respond(not_found("no such endpoint: " + req.path));
}

void Api::leases(const HttpRequest& req, const Caller& caller, HttpServer::Respond respond) {
  const auto& seg = req.segments;
  const bool post = req.method == "POST";
  if (path_is(seg, api_path::kLeases, {})) {
    if (req.method == "GET" || req.method == "HEAD") {
      if (!access_.permits(caller, Action::Read)) return respond(error_response(401, access_.refusal(Action::Read)));
      return respond(json_response(200, {{"leases", model_.host.leases}}));
    }
    if (!post) return respond(method_not_allowed());
    if (!access_.permits(caller, Action::Lease))
      return respond(error_response(access_.refusal_status(caller), access_.refusal(caller, Action::Lease)));
    LeaseRequest lr;
    if (auto bad = parse_lease_request(req.body, lr)) return respond(json_response(400, bad->json()));
    return commands_.request_lease(std::move(lr), caller, [respond](Answer a) { respond(to_http(a)); });
  }
  const bool heartbeat = path_is(seg, api_path::kLeases, {"*", "heartbeat"});
  if ((heartbeat || path_is(seg, api_path::kLeases, {"*"})) && is_lease_id(seg[3])) {
    if (heartbeat ? !post : req.method != "DELETE") return respond(method_not_allowed());
    if (!access_.permits(caller, Action::Lease))
      return respond(error_response(access_.refusal_status(caller), access_.refusal(caller, Action::Lease)));
    if (heartbeat) return respond(to_http(commands_.heartbeat_lease(seg[3], caller)));
    auto reason = req.query.find("reason");
    LeaseReport report;
    if (auto bad = parse_lease_report(req.body, report)) return respond(json_response(400, bad->json()));
    return commands_.end_lease(seg[3], reason != req.query.end() ? reason->second : "ended by request", report, caller,
                               [respond](Answer a) { respond(to_http(a)); });
  }
  respond(not_found("no such endpoint: " + req.path));
}

HttpResponse Api::status(const HttpRequest& req) {
  if (req.query.count("queue") && req.query.at("queue") == "all")
    return {200, "application/json", dump_json(status_to_json(model_.host, true, model_.uptime())), {}};
  // Hundreds of pollers cost one rendering per change of the model (or per 100 ms, for the uptime).
  auto now = steady_now();
  if (status_cache_.empty() || status_generation_ != model_.generation || now - status_at_ > kStatusReuse) {
    status_cache_ = dump_json(status_to_json(model_.host, false, model_.uptime()));
    status_generation_ = model_.generation;
    status_at_ = now;
  }
  return {200, "application/json", status_cache_, {}};
}

HttpResponse Api::runs(const HttpRequest& req) const {
  std::size_t limit = 50;
  if (auto it = req.query.find("limit"); it != req.query.end()) {
    char* end = nullptr;
    long n = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || n < 1 || n > static_cast<long>(kMaxRunsListed))
      return error_response(400, "limit must be 1-" + std::to_string(kMaxRunsListed));
    limit = static_cast<std::size_t>(n);
  }
  nlohmann::json out = nlohmann::json::array();
  auto line = [](const RunOverview& r) {
    return nlohmann::json{{"id", r.id}, {"state", r.state}, {"created", r.created},
                          {"finished", r.finished.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.finished)},
                          {"result", r.result >= 0 ? nlohmann::json(r.result) : nlohmann::json(nullptr)},
                          {"request", r.request}};
  };
  // Active runs first (a run is in exactly one of the two lists, never both), then the finished, newest first.
  for (const auto& r : model_.host.active) out.push_back(line(r));
  const std::size_t active = out.size();
  for (std::size_t i = 0; i < model_.host.recent.size() && out.size() < limit + active; ++i) out.push_back(line(model_.host.recent[i]));
  return json_response(200, {{"runs", out}});
}

nlohmann::json Api::cards_json() const {
  nlohmann::json j = model_.cards.to_json(epoch_now());
  nlohmann::json cards = nlohmann::json::array();
  for (const auto& c : model_.host.cards) {
    nlohmann::json card = {{"id", c.id}, {"type", c.type}, {"state", c.state}, {"drain_reason", c.drain_reason}};
    // Who holds it now (a step, a lease, a program outside pto-runner) and since when: the page draws it up to
    // now, since the day's events are written only when a hold ends.
    if (c.holder)
      card["holder"] = {{"label", c.holder->label}, {"run", c.holder->run}, {"other_program", c.holder->other_program},
                        {"since", c.holder->since.empty() ? c.since : c.holder->since}};
    cards.push_back(std::move(card));
  }
  j["cards"] = std::move(cards);
  return j;
}

namespace {
// ?days=N (default tests.window-days) and ?limit=N of the test history's GETs: "" or what is wrong.
std::string history_window(const HttpRequest& req, double default_days, int default_limit, double& since, int& limit) {
  double days = default_days;
  limit = default_limit;
  if (auto it = req.query.find("days"); it != req.query.end()) {
    char* end = nullptr;
    days = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end || !(days > 0 && days <= 3650)) return "days must be a number of days, 0-3650";
  }
  if (auto it = req.query.find("limit"); it != req.query.end()) {
    char* end = nullptr;
    long n = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end || n < 1 || n > 1000) return "limit must be 1-1000";
    limit = static_cast<int>(n);
  }
  since = epoch_now() - days * 86400;
  return "";
}
}  // namespace

std::shared_ptr<const TestQueries> Api::history_queries(const HttpRequest& req, int default_limit, double& since, int& limit,
                                                        const HttpServer::Respond& respond) const {
  if (std::string bad = history_window(req, model_.tests_window_days, default_limit, since, limit); !bad.empty()) {
    respond(error_response(400, bad));
    return nullptr;
  }
  if (!model_.tests || !workers_) respond(error_response(503, "no test history is kept here (see the daemon's log)"));
  return workers_ ? model_.tests : nullptr;
}

void Api::tests(const HttpRequest& req, HttpServer::Respond respond) {
  auto ref = req.query.find("ref");
  const std::string r = ref == req.query.end() ? "refs/heads/main" : ref->second;
  double since = 0;
  int limit = 0;
  std::shared_ptr<const TestQueries> q = history_queries(req, 20, since, limit, respond);
  if (!q) return;
  const std::string today = utc_date();
  nlohmann::json mutes = nlohmann::json::array();
  for (const TestMute& m : model_.mutes) {
    nlohmann::json j = m.json();
    j["in_force"] = m.until >= today;
    mutes.push_back(std::move(j));
  }
  const double window = model_.tests_window_days;
  boost::asio::post(*workers_, [q, r, since, limit, mutes = std::move(mutes), window, respond] {
    nlohmann::json j = q->ref_summary(r, since, limit);
    if (j.contains("error")) return respond(json_response(503, j));
    j["muted"] = mutes;
    j["window_days"] = window;
    respond(json_response(200, j));
  });
}

void Api::test(const std::string& id, const HttpRequest& req, HttpServer::Respond respond) {
  double since = 0;
  int limit = 0;
  std::shared_ptr<const TestQueries> q = history_queries(req, 200, since, limit, respond);
  if (!q) return;
  const std::string today = utc_date();
  nlohmann::json muted = nullptr;
  for (const TestMute& m : model_.mutes)
    if (m.until >= today && test_glob_match(m.id, id)) {
      muted = m.json();
      break;
    }
  boost::asio::post(*workers_, [q, id, since, limit, muted = std::move(muted), respond] {
    nlohmann::json j = q->test_history(id, since, limit);
    if (j.contains("error")) return respond(json_response(503, j));
    if (j["results"].empty() && j["refs"].empty()) return respond(not_found("no result of test '" + id + "' is kept"));
    j["muted"] = muted;
    respond(json_response(200, j));
  });
}

void Api::run(const std::string& id, const HttpRequest& req, HttpServer::Respond respond) {
  std::optional<RunRevision> since;
  if (auto it = req.query.find("since"); it != req.query.end() && !(since = RunRevision::parse(it->second)))
    return respond(error_response(400, "since: not a revision (the `revision` of an earlier answer: EPOCH-NUMBER-GENERATION)"));
  double wait = 0;
  if (auto it = req.query.find("wait"); it != req.query.end()) {
    char* end = nullptr;
    wait = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end || !(wait > 0 && wait <= kMaxWaitSeconds))
      return respond(error_response(400, "wait: the seconds to hold the answer until the run ends, more than 0 and at most 60"));
  }
  if (wait <= 0 || !model_.active.count(id)) return answer_run(id, since, std::move(respond));
  // Held until the run ends (its host calls `answer`) or `wait` passes (the timer does), whichever is first;
  // the other finds it answered. The timer holds `answer` until it fires: the host keeps only a weak reference.
  auto answered = std::make_shared<bool>(false);
  auto answer = std::make_shared<const std::function<void()>>(
      [this, alive = std::weak_ptr<bool>(alive_), answered, id, since, respond = std::move(respond)] {
        if (*answered || alive.expired()) return;
        *answered = true;
        answer_run(id, since, respond);
      });
  commands_.when_run_ends(id, answer);
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                     std::chrono::duration<double>(wait)));
  timer->async_wait([timer, answer](boost::system::error_code) { (*answer)(); });
}

void Api::answer_run(const std::string& id, const std::optional<RunRevision>& since, HttpServer::Respond respond) {
  if (auto it = model_.active.find(id); it != model_.active.end()) {
    nlohmann::json j = active_run_json(*it->second.engine, model_, since);
    if (!j.contains("delta")) j["request"] = *it->second.request;
    return answer_off_thread(std::move(j), std::move(respond));
  }
  commands_.run_read(id);
  finished_record(
      id, respond, [respond](const nlohmann::json& record) { respond(json_response(200, record)); },
      [respond](std::string text) { respond(HttpResponse{200, "application/json", std::move(text), {}}); });
}

void Api::answer_off_thread(nlohmann::json j, HttpServer::Respond respond) {
  // A whole run of 1,000 steps is a megabyte of text: dumping it held the engine's thread for ~10 ms (the
  // first answer to `submit` came while the run's first steps ended, and their cards waited). What it shows is
  // kept first, here, as for every answer (Api::handle); the text is made and sent on a worker.
  if (!workers_) return respond(json_response(200, j));
  commands_.durable();
  boost::asio::post(*workers_, [j = std::move(j), respond = std::move(respond)]() mutable {
    HttpResponse r = json_response(200, j);
    j = nlohmann::json();  // freed here too
    respond(std::move(r));
  });
}

void Api::run_json(const std::string& id, HttpServer::Respond respond, std::function<void(const nlohmann::json&)> found) {
  if (auto it = model_.active.find(id); it != model_.active.end()) {
    const RunEngine& e = *it->second.engine;
    return found(run_to_json(e.record(), e.plan(), e.record().cancelled ? "cancelling" : "running", -1, e.now()));
  }
  finished_record(id, respond, std::move(found));
}

void Api::finished_record(const std::string& id, HttpServer::Respond respond, std::function<void(const nlohmann::json&)> found,
                          std::function<void(std::string)> verbatim) {
  if (auto h = model_.held_records.find(id); h != model_.held_records.end()) return found(h->second);
  if (const std::string* text = verbatim ? model_.finished_texts.find(id) : nullptr) return verbatim(*text);
  if (!workers_) return respond(not_found("no run " + id));
  // Its run.json beside its logs, read on a worker; a run the model lists whose record cannot be read is a
  // problem of the host (503), one it does not list is not there (404).
  bool listed = false;
  for (const auto& r : model_.host.recent) listed |= r.id == id;
  const std::string path = run_record(run_dir(model_.state_dir, id));
  boost::asio::post(*workers_, [this, id, path, listed, respond, found = std::move(found), verbatim = std::move(verbatim)] {
    std::string text, error;
    bool read = read_regular_file(path, 64 << 20, text, error);
    auto record = read ? nlohmann::json::parse(text, nullptr, false) : nlohmann::json();
    const bool finished = record.is_object() && record.value("state", "") != "running";
    if (!finished || !verbatim) text.clear();
    else record = nlohmann::json();  // read and checked here; the engine's thread only hands the text on
    boost::asio::post(io_, [id, listed, respond, found, verbatim, error, finished, record = std::move(record), text = std::move(text)]() mutable {
      if (finished && verbatim) return verbatim(std::move(text));
      if (finished) return found(record);
      if (listed) return respond(error_response(503, "the record of run " + id + " cannot be read now (" +
                                                         (error.empty() ? "run.json is not a finished run's record" : error) + ")"));
      respond(not_found("no run " + id));
    });
  });
}

void Api::step_log(const std::string& id, const std::string& step, const HttpRequest& req, HttpServer::Respond respond) {
  const std::optional<StepId> step_id = StepId::parse(step);
  if (!step_id) return respond(not_found("no step '" + step + "' (step ids look like 3-9)"));
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
  if (!number("tail", 1, 100000, tail)) return respond(error_response(400, "tail must be 1-100000"));
  if (!number("offset", 0, UINT64_MAX / 2, offset)) return respond(error_response(400, "offset must be a byte offset >= 0"));
  if (!number("bytes", 1, kMaxLogRead, bytes)) return respond(error_response(400, "bytes must be 1-" + std::to_string(kMaxLogRead)));
  if (tail && offset) return respond(error_response(400, "give tail or offset, not both"));
  if (!workers_) return respond(not_found("no logs here"));
  // The path comes from the run's own record, never from the URL.
  const std::size_t job = step_id->job, st = step_id->step;
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
  if (auto it = model_.active.find(id); it != model_.active.end()) {
    const auto& rec = it->second.engine->record();
    if (job < rec.jobs.size() && st < rec.jobs[job].steps.size()) return serve(rec.jobs[job].steps[st].log_path);
    return respond(not_found("no step " + step + " in run " + id));
  }
  finished_record(id, respond, [id, step, job, st, respond, serve](const nlohmann::json& rec) {
    const nlohmann::json jobs = rec.value("jobs", nlohmann::json::array());
    const nlohmann::json steps = jobs.is_array() && job < jobs.size() && jobs[job].is_object()
                                     ? jobs[job].value("steps", nlohmann::json::array()) : nlohmann::json::array();
    if (!steps.is_array() || st >= steps.size() || !steps[st].is_object()) return respond(not_found("no step " + step + " in run " + id));
    serve(steps[st].value("log_path", ""));
  });
}

}  // namespace pto
