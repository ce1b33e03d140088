#pragma once
// The definitions an import builds, between the workflow's YAML walk (importer/workflow_import), the folding
// of example steps into models (importer/model_folding) and the writing of jobs/ and models/ files
// (importer/definitions_emitter).
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/yaml_map.h"

namespace pto::imported {

// `export NAME=...` lines made of env values (by name, so a step's own value can replace its job's).
using Exports = std::vector<std::pair<std::string, std::string>>;

struct Step {
  SourceLoc loc;
  std::string name, run, if_expr, working_directory, id;
  std::map<std::string, std::string> env;
  std::optional<double> timeout, queue_timeout, run_timeout;
  bool continue_on_error = false;
  int devices = 0;
  bool task_submit = false;
  // Set when folded into a model: which model and example.
  std::string model, example, args;
  bool repeat = false;  // the same example with the same arguments as an earlier step: not emitted
};

struct Job {
  std::string id, if_expr;
  std::vector<std::string> needs;
  std::map<std::string, std::string> env;
  std::vector<std::pair<std::string, std::string>> outputs;
  YAML::Node strategy;  // carried over as written (matrix, fail-fast, max-parallel)
  bool toolchain = false;      // needed the workflow's `toolchain` job: pto-runner's lead job does that
  std::string device_type;     // runs-on `npu-TYPE`
  std::optional<double> timeout;
  bool continue_on_error = false;
  std::vector<Step> steps;
};

struct Model {
  std::string id, display, dir, command;
  std::vector<const Step*> examples;
};

/// `s` without white space at either end.
std::string trim(std::string s);

}  // namespace pto::imported
