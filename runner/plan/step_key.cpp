#include "plan/step_key.h"

#include "util/sha256.h"

namespace pto {

std::string step_key(const StepKeyFields& f) {
  nlohmann::json j;  // nlohmann::json objects are std::map-backed: dump() is key-sorted, hence canonical
  j["run"] = f.run;
  j["env"] = f.env;
  j["working-directory"] = f.working_directory;
  j["shell"] = f.shell.empty() ? "bash" : f.shell;
  j["devices"] = f.devices;
  if (!f.if_expr.empty()) j["if"] = f.if_expr;
  if (!f.uses.empty()) j["uses"] = f.uses;
  if (!f.with.is_null()) j["with"] = f.with;
  return sha256_hex(j.dump());
}

}  // namespace pto
