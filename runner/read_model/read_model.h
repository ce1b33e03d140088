#pragma once
// ReadModel: everything a GET renders, kept by the host's engine thread and read by the API on the same thread,
// never written by it: the typed host view (read_model/host_view.h) refreshed after transitions, the active runs'
// engines (const), finished records held in memory, the counters behind /metrics, and where finished runs'
// records lie on disk. A GET never runs the scheduler, opens the journal or reads a configuration file.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "read_model/counters.h"
#include "read_model/card_history.h"
#include "read_model/finished_texts.h"
#include "read_model/host_view.h"
#include "read_model/case_queries.h"
#include "read_model/perf_queries.h"
#include "util/clock.h"

namespace pto {

class RunEngine;

struct ActiveRunRef {
  const RunEngine* engine = nullptr;
  const nlohmann::json* request = nullptr;  // as journaled (env names only)
};

struct ReadModel {
  HostView host;
  /// Kept current at once (a run's entry goes when its engine does), not only at refresh.
  std::map<std::string, ActiveRunRef> active;
  /// Finished runs whose record only memory holds for now (the journal or run.json could not take it).
  std::map<std::string, nlohmann::json> held_records;
  /// The last runs to finish, their run.json's text (read_model/finished_texts).
  FinishedTexts finished_texts;
  Metrics metrics;
  /// The last day on every card (GET /cards), kept by RunHistory.
  CardHistory cards;
  /// The test history's queries (store/case_history_queries), called on the API's workers; null: none kept.
  std::shared_ptr<const TestQueries> tests;
  std::shared_ptr<const PerfQueries> perf;  // perf steps' history (GET /api/v1/perf, /perf); null: none kept
  /// Every mute (runner.yml's, then the API's) and the flip rate's window, as GET /api/v1/tests and /tests show.
  std::vector<TestMute> mutes;
  double tests_window_days = 14;
  /// Bisections (bisect/bisections), newest first: each its whole record (bisect/bisection's JSON with
  /// its times), kept current by the daemon at every change.
  std::vector<nlohmann::json> bisections;

  /// Where finished runs' records are (util/state_paths: run_record), read on a worker.
  std::string state_dir;
  std::chrono::steady_clock::time_point started = steady_now();
  /// Bumped at each refresh of `host`: renderings cache by it.
  std::uint64_t generation = 0;
  double uptime() const { return std::chrono::duration<double>(steady_now() - started).count(); }
};

}  // namespace pto
