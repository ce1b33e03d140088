#include "exec/launch_json.h"

#include "util/secret_mask.h"

namespace pto {

namespace {

using nlohmann::json;

template <typename T>
T get(const json& j, const char* key, T fallback) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

}  // namespace

json launch_json(const StepLaunch& l) {
  json j = {{"label", l.label},
            {"command", l.command},
            {"shell", l.shell},
            {"working_directory", l.working_directory},
            {"env", l.env},
            {"log_path", l.log_path},
            {"marker", l.marker},
            {"timeout_seconds", l.timeout_seconds},
            {"grace_seconds", l.grace_seconds},
            {"log_max_bytes", l.log_max_bytes},
            {"card_files", l.card_files},
            {"limits", {{"pids_max", l.limits.pids_max}, {"memory_max", l.limits.memory_max}, {"cpus", l.limits.cpus}, {"memory_asked", l.limits.memory_asked}}},
            {"devices", l.devices},
            {"device_type", l.device_type}};
  if (l.run_as) j["run_as"] = {{"name", l.run_as->name}, {"uid", l.run_as->uid}, {"gid", l.run_as->gid}, {"groups", l.run_as->groups}};
  if (l.mask) j["mask"] = l.mask->values();
  if (!l.take_prefix.empty()) j["take_prefix"] = l.take_prefix;
  return j;
}

StepLaunch launch_from_json(const json& j) {
  StepLaunch l;
  l.label = get<std::string>(j, "label", "");
  l.command = get<std::string>(j, "command", "");
  l.shell = get<std::string>(j, "shell", "bash");
  l.working_directory = get<std::string>(j, "working_directory", "");
  l.env = get<std::vector<std::string>>(j, "env", {});
  l.log_path = get<std::string>(j, "log_path", "");
  l.marker = get<std::string>(j, "marker", "");
  l.take_prefix = get<std::string>(j, "take_prefix", "");
  l.timeout_seconds = get<double>(j, "timeout_seconds", 0);
  l.grace_seconds = get<double>(j, "grace_seconds", 10);
  l.log_max_bytes = get<std::uint64_t>(j, "log_max_bytes", 0);
  l.card_files = get<std::vector<std::string>>(j, "card_files", {});
  const json limits = get<json>(j, "limits", json::object());
  l.limits.pids_max = get<std::uint64_t>(limits, "pids_max", 0);
  l.limits.memory_max = get<std::uint64_t>(limits, "memory_max", 0);
  l.limits.cpus = get<int>(limits, "cpus", 0);
  l.limits.memory_asked = get<bool>(limits, "memory_asked", false);
  l.devices = get<int>(j, "devices", 0);
  l.device_type = get<std::string>(j, "device_type", "");
  if (j.is_object() && j.contains("run_as") && j["run_as"].is_object()) {
    const json& r = j["run_as"];
    l.run_as = RunAs{get<std::string>(r, "name", ""), get<uid_t>(r, "uid", 0), get<gid_t>(r, "gid", 0), get<std::vector<gid_t>>(r, "groups", {})};
  }
  if (j.is_object() && j.contains("mask")) {
    l.mask = std::make_shared<SecretMask>();
    l.mask->add_values(get<std::vector<std::string>>(j, "mask", {}));
  }
  return l;
}

json outcome_json(const StepOutcome& o) {
  return {{"exit_code", o.exit_code}, {"signal", o.signal},       {"timed_out", o.timed_out},         {"cancelled", o.cancelled},
          {"error", o.error},         {"log_error", o.log_error}, {"survivors", o.survivors},         {"limit_reached", o.limit_reached},
          {"pid", o.pid}};
}

StepOutcome outcome_from_json(const json& j) {
  StepOutcome o;
  o.exit_code = get<int>(j, "exit_code", -1);
  o.signal = get<int>(j, "signal", 0);
  o.timed_out = get<bool>(j, "timed_out", false);
  o.cancelled = get<bool>(j, "cancelled", false);
  o.error = get<std::string>(j, "error", "");
  o.log_error = get<std::string>(j, "log_error", "");
  o.survivors = get<std::string>(j, "survivors", "");
  o.limit_reached = get<std::string>(j, "limit_reached", "");
  o.pid = get<int>(j, "pid", 0);
  return o;
}

}  // namespace pto
