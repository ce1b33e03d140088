#pragma once
// The canonical step key: what a step does, not what it is called.
//
// sha256 over a canonical, length-prefixed encoding (env sorted) of the fields that change behaviour: run
// (trailing blanks of its lines ignored), env, working-directory, shell, devices and their type, the if:
// condition, and for GitHub workflow steps uses/with. Two
// steps of one job with the same key do the same work, so the second is deduplicated (plan) or reported
// (lint duplicate-step). Timeouts and retries are left out on purpose: a copy with a tweaked timeout is
// still the same work burning a second card allocation.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

struct StepKeyFields {
  std::string run;
  std::map<std::string, std::string> env;
  std::string working_directory;
  std::string shell = "bash";
  int devices = 0;
  std::string if_expr;
  std::string uses;       // workflow steps only
  nlohmann::json with;    // workflow steps only (null when absent)
  std::string device_type;  // "" = any card
};

std::string step_key(const StepKeyFields& f);

}  // namespace pto
