#pragma once
// A local composite action a workflow step uses (`uses: ./.github/actions/X`, with its `with:`), read so the
// drift check sees what a job's setup does (SPEC "A drift check that can gate CI": the steps of local
// composite actions, and the setup lines they add, such as pypto's `unset-ring: 'true'` unsetting
// PTO2_RING_* in activate.sh). Nothing is run: its `${{ inputs.X }}` become the caller's `with:` values (else
// the inputs' defaults), and its scripts are read for `unset` lines on the branches `if [ "$V" = "x" ]`
// takes under its steps' env.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace pto {

struct CompositeStep {
  std::string name;
  std::string run;  // its inputs substituted
  std::string sha;  // sha256 of its run as the action writes it, first 12 hex digits: a changed step is a new finding
};

struct CompositeUse {
  std::string action;  // as written: ./.github/actions/setup-ci-job
  std::vector<CompositeStep> steps;
  std::set<std::string> unsets;  // variables its scripts unset, or write an `unset` of (into activate.sh)
};

/// The action at `repo_root`/`uses` (its action.yml or action.yaml) with `with` given; nullopt with `problem`
/// when it cannot be read or is not a composite action.
std::optional<CompositeUse> read_composite_action(const std::string& repo_root, const std::string& uses, const YAML::Node& with,
                                                  std::string& problem);

/// The variables `script` unsets (`unset A B`, also inside a printf or echo of such a line), on the paths
/// its `if [ "$V" = "x" ]; then ... else ... fi` take for the values in `env` (an unknown test: both paths).
std::set<std::string> unset_names(const std::string& script, const std::map<std::string, std::string>& env);

}  // namespace pto
