#pragma once
// What `GET /api/v1/runs/{id}` answers of an active run: the whole run, or, with `?since=REVISION` (the
// `revision` an earlier answer gave), only what changed since then, so a client that follows a run (`submit
// --wait`) pays for what changed rather than for every step at every poll. A delta ("delta": true) has the
// run's own fields and every job's, and in each job's `steps` only the steps changed since, each with its `id`;
// the waiting steps it carries have their `queue` entry, and it always carries the run's first step in the
// queue and every waiting step whose first forecast came since. Time that passes alone (a waiting step's
// wait_seconds, a running step's duration_seconds) is not a change. A revision of another engine (the run
// was taken over by a restarted daemon) gets the whole run again.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pto {

class RunEngine;
struct ReadModel;

/// "EPOCH-NUMBER-GENERATION": the engine's epoch (hex), its revision number, the read model's generation.
struct RunRevision {
  std::uint64_t epoch = 0, number = 0, generation = 0;
  std::string text() const;
  /// Nothing for any other shape.
  static std::optional<RunRevision> parse(std::string_view text);
};

/// Active run `e` as the API renders it, with its `revision`: whole, or its changes since `since` when that
/// is a revision of this engine and model no later than now.
nlohmann::json active_run_json(const RunEngine& e, const ReadModel& model, const std::optional<RunRevision>& since);

}  // namespace pto
