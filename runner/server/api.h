#pragma once
// Api: the HTTP API (SPEC: Daemon; docs/reference.md: HTTP API) as its own type, over the host's const read model and its
// narrow commands face. One route table (route()), one bearer check (Access::identify), the permission table
// in Access::permits. GETs render the read model (JSON status, /metrics, the page, run records and logs;
// files are read on a worker); mutations are checked into types (server/requests) and handed to the commands.
// Used by `serve` (every route) and by a foreground `run`'s lease endpoints (leases only).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/access.h"
#include "server/host_commands.h"
#include "server/run_changes.h"
#include "server/http_server.h"
#include "read_model/read_model.h"

namespace boost::asio {
class io_context;
class thread_pool;
}

namespace pto {

struct ApiOptions {
  /// Only the lease routes (a foreground run's own endpoints); anything else is 404 with this note.
  bool leases_only = false;
  std::string leases_only_note;
};

class Api {
 public:
  /// `workers` read logs and records off the engine thread (null: none, with leases_only).
  Api(boost::asio::io_context& io, boost::asio::thread_pool* workers, const ReadModel& model, HostCommands& commands,
      const Access& access, ApiOptions options = {});
  /// Answers `req` exactly once: at once, or later (a submission, a lease grant, a file read).
  void handle(const HttpRequest& req, HttpServer::Respond respond);

  static constexpr std::size_t kMaxRunsListed = 1000;  // GET /api/v1/runs?limit=
  static constexpr double kMaxWaitSeconds = 60;        // GET /api/v1/runs/{id}?wait=

 private:
  struct Route;
  void route(const HttpRequest& req, const Caller& caller, HttpServer::Respond respond);
  void leases(const HttpRequest& req, const Caller& caller, HttpServer::Respond respond);
  HttpResponse status(const HttpRequest& req);
  HttpResponse runs(const HttpRequest& req) const;
  /// GET /api/v1/cards: the last day on every card (the read model's CardHistory) and each card's state now.
  nlohmann::json cards_json() const;
  /// GET /api/v1/tests?ref= and GET /api/v1/tests/{id}: the test history's queries, on a worker.
  void tests(const HttpRequest& req, HttpServer::Respond respond);
  /// GET /api/v1/perf (perf_api.cpp): the metrics kept, or one metric's series on a ref.
  void perf(const HttpRequest& req, HttpServer::Respond respond);
  /// The queries and window (?days=, ?limit=) of a test history GET; null once it has answered 400 or 503.
  std::shared_ptr<const TestQueries> history_queries(const HttpRequest& req, int default_limit, double& since, int& limit,
                                                     const HttpServer::Respond& respond) const;
  void test(const std::string& id, const HttpRequest& req, HttpServer::Respond respond);
  /// GET /api/v1/runs/{id}[?since=REVISION][&wait=SECONDS]: an active run rendered now (whole, or what changed:
  /// server/run_changes), a finished one's record. With `wait` an active run's answer is held until the run ends
  /// or SECONDS pass, whichever is first (a client following a run hears its end at once, not at its next poll).
  void run(const std::string& id, const HttpRequest& req, HttpServer::Respond respond);
  void answer_run(const std::string& id, const std::optional<RunRevision>& since, HttpServer::Respond respond);
  void step_log(const std::string& id, const std::string& step, const HttpRequest& req, HttpServer::Respond respond);
  /// 200 with `j`, dumped and sent on a worker (the journal made durable first, on this thread).
  void answer_off_thread(nlohmann::json j, HttpServer::Respond respond);
  /// A run's JSON, active (rendered now) or finished (its run.json, read on a worker).
  void run_json(const std::string& id, HttpServer::Respond respond, std::function<void(const nlohmann::json&)> found);
  /// A finished run's record from memory or its run.json (on a worker); `found` runs on the engine thread.
  /// With `verbatim`, a record read from run.json goes there as the file's text instead: dump_json wrote it, so
  /// it is the answer's body byte for byte, not dumped again on the engine's thread (megabytes for a big run).
  void finished_record(const std::string& id, HttpServer::Respond respond, std::function<void(const nlohmann::json&)> found,
                       std::function<void(std::string)> verbatim = nullptr);

  boost::asio::io_context& io_;
  boost::asio::thread_pool* workers_;
  const ReadModel& model_;
  HostCommands& commands_;
  const Access& access_;
  ApiOptions options_;
  std::string status_cache_;  // the rendered status, reused within a generation (at most 100 ms)
  std::uint64_t status_generation_ = 0;
  std::chrono::steady_clock::time_point status_at_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // a held answer outliving the Api gives up
};

/// The answer a command came to, as HTTP.
HttpResponse to_http(const Answer& a);

}  // namespace pto
