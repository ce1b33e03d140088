// GET /api/v1/perf (SPEC "Performance, judged like an experiment"): without `metric`, each metric kept and the
// refs it has a history on; with `metric` (and `ref`, default main; `card_type`; `limit`, default 100), that
// series, oldest first: each run's samples, their median, the cards, the commit and the verdict.
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "read_model/read_model.h"
#include "server/api.h"
#include "server/http_responses.h"

namespace pto {

void Api::perf(const HttpRequest& req, HttpServer::Respond respond) {
  std::shared_ptr<const PerfQueries> q = model_.perf;
  if (!q || !workers_) return respond(error_response(503, "no perf history is kept here (see the daemon's log)"));
  auto arg = [&](const char* name, const std::string& fallback) {
    auto it = req.query.find(name);
    return it == req.query.end() ? fallback : it->second;
  };
  const std::string metric = arg("metric", ""), ref = arg("ref", "refs/heads/main"), card_type = arg("card_type", "");
  int limit = 100;
  const std::string l = arg("limit", "100");
  if (l.empty() || l.size() > 4 || l.find_first_not_of("0123456789") != std::string::npos || (limit = std::stoi(l)) < 1)
    return respond(error_response(400, "limit: a number of runs from 1 to 9999, got '" + l + "'"));
  boost::asio::post(*workers_, [q, metric, ref, card_type, limit, respond] {
    nlohmann::json j;
    if (metric.empty()) {
      j["metrics"] = nlohmann::json::array();
      for (const auto& [m, r] : q->metrics()) j["metrics"].push_back({{"metric", m}, {"ref", r}});
      return respond(json_response(200, j));
    }
    j = {{"metric", metric}, {"ref", ref}, {"card_type", card_type}, {"series", nlohmann::json::array()}};
    for (const PerfRecord& r : q->series(metric, ref, card_type, limit))
      j["series"].push_back({{"run", r.run}, {"step", r.step}, {"commit", r.commit}, {"at", r.at}, {"card_type", r.card_type},
                             {"unit", r.unit}, {"samples", r.samples}, {"base_samples", r.base_samples}, {"cards", r.cards},
                             {"median", r.median}, {"change", r.change}, {"verdict", r.verdict}});
    respond(json_response(200, j));
  });
}

}  // namespace pto
