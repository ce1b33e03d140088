#pragma once
// models/NAME.yml: one model, its script directory, its command template and its examples.
//
// A maintainer adds a model step by adding one line to `examples`; a job's `models: [NAME]` expands to one
// step per example (see plan/plan.cpp).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "config/perf_spec.h"
#include "config/yaml_map.h"

namespace pto {

/// The three time bounds of a step (GitHub's and task-submit's): `timeout-minutes` from the moment it may
/// start (waiting for cards included, as a GitHub step's clock counts task-submit's wait),
/// `queue-timeout-minutes` on the wait for cards (task-submit --timeout), `run-timeout-minutes` on the run
/// once the cards are granted (task-submit --max-time).
struct StepTimeouts {
  std::optional<double> total, queue, run;
};

struct ModelExample {
  std::string name;
  int devices = 1;
  std::string device_type;  // "" = any card
  std::string args;
  std::optional<double> timeout_minutes;
  std::optional<double> queue_timeout_minutes, run_timeout_minutes;
  std::optional<double> expected_minutes;
  std::map<std::string, std::string> env;
  std::optional<int> cpus;  // `cpus:` and `memory:` (bytes), as a step's
  std::optional<std::uint64_t> memory;
  SourceLoc loc;
  SourceLoc cpus_loc, memory_loc;
  std::optional<PerfSpec> perf;  // `perf:` (config/perf_spec): the example is a benchmark
};

struct ModelFile {
  std::string file;  // display path, e.g. models/deepseek-v4-flash.yml
  std::string id;    // file stem, the name jobs use in `models:`
  std::string model;  // display name, e.g. DeepSeek-V4-Flash
  std::string dir;
  std::string command;
  std::optional<double> timeout_minutes;
  std::optional<double> queue_timeout_minutes, run_timeout_minutes;
  std::optional<double> expected_minutes;
  std::string device_type;  // the examples' default
  std::vector<ModelExample> examples;
  SourceLoc loc;

  /// The command for one example: {dir}, {example}, {args}, {model}, {devices} filled in.
  std::string command_for(const ModelExample& ex) const;
};

ModelFile load_model_file(const std::string& path, const std::string& display, const std::string& id,
                          Diagnostics& diags);

}  // namespace pto
