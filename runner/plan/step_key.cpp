#include "plan/step_key.h"

#include "util/json_text.h"
#include "util/sha256.h"

namespace pto {

namespace {
// Length-prefixed fields: exact for any bytes (no escaping, no UTF-8 assumptions), and unambiguous because
// every field carries its name and length.
void field(std::string& out, const char* name, const std::string& value) {
  out += name;
  out += '\0';
  out += std::to_string(value.size());
  out += '\0';
  out += value;
}
// Trailing blanks on a line (and blank lines at the end) change nothing bash runs; an editor adds or strips
// them freely, so two copies differing only there are one step.
std::string without_trailing_blanks(const std::string& run) {
  std::string out;
  std::size_t pos = 0;
  while (pos <= run.size()) {
    std::size_t nl = run.find('\n', pos);
    std::string line = run.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    pos = nl + 1;
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}
}  // namespace

std::string step_key(const StepKeyFields& f) {
  std::string canon;
  field(canon, "run", without_trailing_blanks(f.run));
  for (const auto& [k, v] : f.env) {  // std::map: sorted by name
    field(canon, "env.name", k);
    field(canon, "env.value", v);
  }
  field(canon, "working-directory", f.working_directory);
  field(canon, "shell", f.shell.empty() ? "bash" : f.shell);
  field(canon, "devices", std::to_string(f.devices));
  if (!f.device_type.empty()) field(canon, "device-type", f.device_type);
  if (!f.if_expr.empty()) field(canon, "if", f.if_expr);
  if (!f.uses.empty()) field(canon, "uses", f.uses);
  // nlohmann::json objects are std::map-backed: the dump is key-sorted, hence canonical.
  if (!f.with.is_null()) field(canon, "with", dump_json(f.with));
  return sha256_hex(canon);
}

}  // namespace pto
