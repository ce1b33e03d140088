#include "server/requests.h"

#include <regex>

namespace pto {

namespace {

bool matches(const std::string& s, const char* pattern) { return std::regex_match(s, std::regex(pattern)); }
BodyError refuse(std::string field, std::string why) { return {std::move(field), std::move(why)}; }

}  // namespace

std::optional<BodyError> parse_run_submission(const std::string& text, RunSubmission& s) {
  nlohmann::json body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (body.is_discarded()) return refuse("", "the body is not valid JSON");
  if (!body.is_object()) return refuse("", "the body must be a JSON object {\"jobs\": [...], \"ref\", \"sha\", \"env\", \"github\"}");
  for (const auto& [k, v] : body.items())
    if (k != "jobs" && k != "ref" && k != "sha" && k != "env" && k != "secrets" && k != "github" && k != "attach" && k != "control" && k != "reuse")
      return refuse(k, "unknown field '" + k + "'");
  if (body.contains("attach")) {
    if (!body["attach"].is_string() || !matches(body["attach"].get<std::string>(), "[A-Za-z0-9_./:-]{1,300}"))
      return refuse("attach", "attach is the workflow run's key, e.g. OWNER/REPO/RUN_ID/RUN_ATTEMPT");
    s.attach = body["attach"].get<std::string>();
    if (!body.contains("jobs") || !body["jobs"].is_array() || body["jobs"].empty())
      return refuse("jobs", "an attached submission names its jobs (submit --job NAME --attach)");
  }
  if (body.contains("jobs")) {
    if (!body["jobs"].is_array()) return refuse("jobs", "jobs must be a list of job names");
    for (const auto& j : body["jobs"]) {
      if (!j.is_string()) return refuse("jobs", "jobs must be a list of job names");
      s.jobs.push_back(j.get<std::string>());
    }
  }
  for (const char* f : {"ref", "sha"})
    if (body.contains(f) && !body[f].is_string()) return refuse(f, std::string(f) + " must be a string");
  s.ref = body.value("ref", "");
  s.sha = body.value("sha", "");
  if (body.contains("control")) {
    if (!body["control"].is_boolean()) return refuse("control", "control is true or false (submit --control)");
    s.control = body["control"].get<bool>();
  }
  if (body.contains("reuse")) {
    if (!body["reuse"].is_boolean()) return refuse("reuse", "reuse is true or false (submit --no-reuse)");
    s.reuse = body["reuse"].get<bool>();
  }
  for (const char* field : {"env", "secrets"}) {
    if (!body.contains(field)) continue;
    const std::string f = field;
    if (!body[f].is_object()) return refuse(f, f + " must be an object of NAME: \"value\"");
    for (const auto& [k, v] : body[f].items()) {
      if (!matches(k, "[A-Za-z_][A-Za-z0-9_]*") || !v.is_string() || k.rfind("PTO_RUNNER_", 0) == 0)
        return refuse(f + "." + k, f + " entries are NAME: \"value\" with NAME like [A-Za-z_][A-Za-z0-9_]* (not PTO_RUNNER_*)");
      (f == "env" ? s.env : s.secrets)[k] = v.get<std::string>();
    }
  }
  if (body.contains("github")) {
    // Only shown and linked, never run; still checked so the status page links where it says.
    static const std::map<std::string, const char*> fields = {
        {"repository", "[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}"}, {"run_id", "[0-9]{1,20}"},
        {"run_attempt", "[0-9]{1,6}"}, {"server_url", "https?://[A-Za-z0-9.:-]{1,200}"},
        {"workflow", "[^\\x00-\\x1f]{0,200}"}, {"event_name", "[a-z_]{1,50}"}, {"actor", "[A-Za-z0-9_.\\[\\]-]{1,100}"},
        {"head_ref", "[A-Za-z0-9_./+@-]{1,255}"}};
    if (!body["github"].is_object()) return refuse("github", "github must be an object");
    s.github = nlohmann::json::object();
    for (const auto& [k, v] : body["github"].items()) {
      auto it = fields.find(k);
      if (it == fields.end()) return refuse("github." + k, "unknown field 'github." + k + "'");
      if (!v.is_string() || !matches(v.get<std::string>(), it->second))
        return refuse("github." + k, "github." + k + " must be a string like " + it->second);
      s.github[k] = v;
    }
    if (s.github.contains("server_url") && s.github.contains("repository") && s.github.contains("run_id"))
      s.github["run_url"] = s.github["server_url"].get<std::string>() + "/" + s.github["repository"].get<std::string>() +
                            "/actions/runs/" + s.github["run_id"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<BodyError> parse_lease_request(const std::string& text, LeaseRequest& lr) {
  nlohmann::json body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return refuse("", "the body must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (k == "devices") {
      if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 4096) return refuse(k, "devices is a count of cards, 1 or more");
      lr.devices = v.get<int>();
    } else if (k == "device-ids") {
      if (!v.is_array() || v.empty()) return refuse(k, "device-ids is a list of card ids");
      for (const auto& id : v) {
        if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() > 1000000)
          return refuse(k, "device-ids: no card " + id.dump() + " on this host");
        lr.device_ids.push_back(id.get<int>());
      }
    } else if (k == "device-type") {
      if (!v.is_string()) return refuse(k, "device-type is a card type name");
      lr.device_type = v.get<std::string>();
    } else if (k == "max-seconds" || k == "wait-seconds") {
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 7 * 86400.0) return refuse(k, k + " is a number of seconds >= 0");
      (k == "max-seconds" ? lr.max_seconds : lr.wait_seconds) = v.get<double>();
    } else if (k == "label") {
      if (!v.is_string()) return refuse(k, "label is a string");
      lr.label = v.get<std::string>().substr(0, 4096);
    } else if (k == "test") {
      if (!v.is_string()) return refuse(k, "test is a test id (pytest's node id)");
      lr.test = v.get<std::string>().substr(0, 4096);
    } else if (k == "waiting-since") {
      if (!v.is_number() || v.get<double>() < 0) return refuse(k, "waiting-since is when its client first asked, in seconds since the epoch");
      lr.waiting_since = v.get<double>();
    } else {
      return refuse(k, "unknown field '" + k + "'");
    }
  }
  return std::nullopt;
}

std::optional<BodyError> parse_lease_report(const std::string& text, LeaseReport& out) {
  if (text.empty()) return std::nullopt;
  nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return refuse("", "the body must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (k == "exit-code" || k == "signal") {
      if (!v.is_number_integer() || v.get<long long>() < -1 || v.get<long long>() > 255) return refuse(k, k + " is an integer from -1 to 255");
      (k == "signal" ? out.signal : out.exit_code) = v.get<int>();
    } else if (k == "output") {
      if (!v.is_string()) return refuse(k, "output is a string");
      out.output = v.get<std::string>();
    } else {
      return refuse(k, "unknown field '" + k + "'");
    }
  }
  out.given = true;
  return std::nullopt;
}

std::optional<BodyError> parse_detach(const std::string& text, std::string& client, bool& cancel) {
  nlohmann::json body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return refuse("", "the body must be a JSON object {\"client\", \"cancel\"}");
  for (const auto& [k, v] : body.items())
    if (k != "client" && k != "cancel") return refuse(k, "unknown field '" + k + "'");
  if (!body.contains("client") || !body["client"].is_string()) return refuse("client", "client is the id its attach answered with");
  if (body.contains("cancel") && !body["cancel"].is_boolean()) return refuse("cancel", "cancel is true or false");
  client = body["client"].get<std::string>();
  cancel = body.value("cancel", false);
  return std::nullopt;
}

std::string drain_reason_of(const std::string& text) {
  auto body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  return body.is_object() && body.contains("reason") && body["reason"].is_string() ? body["reason"].get<std::string>()
                                                                                  : "drained by an operator";
}

namespace {
// A test id or glob: printable, one line, bounded (it is shown on pages and kept in the journal).
bool is_test_glob(const std::string& s) {
  if (s.empty() || s.size() > 1000) return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}
}  // namespace

std::optional<BodyError> parse_test_mute(const std::string& text, const std::string& today, TestMute& m) {
  nlohmann::json body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return refuse("", "the body must be a JSON object {\"id\": GLOB, \"reason\": TEXT, \"until\": \"YYYY-MM-DD\"}");
  for (const auto& [k, v] : body.items())
    if (k != "id" && k != "reason" && k != "until") return refuse(k, "unknown field '" + k + "'");
  for (const char* f : {"id", "reason", "until"})
    if (!body.contains(f) || !body[f].is_string()) return refuse(f, std::string(f) + " is required (a string)");
  m.id = body["id"].get<std::string>();
  m.reason = body["reason"].get<std::string>();
  m.until = body["until"].get<std::string>();
  if (!is_test_glob(m.id)) return refuse("id", "id is a test id or glob (* and ?), one line of at most 1000 characters");
  if (m.reason.empty() || m.reason.size() > 500 || m.reason.find('\n') != std::string::npos)
    return refuse("reason", "reason says why in one line of at most 500 characters (an issue link)");
  if (!is_utc_date(m.until)) return refuse("until", "until is a date like 2026-12-31");
  if (m.until < today) return refuse("until", "until (" + m.until + ") is before today (" + today + ", UTC): it would mute nothing");
  return std::nullopt;
}

std::optional<BodyError> parse_test_unmute(const std::string& text, std::string& glob) {
  nlohmann::json body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("id") || !body["id"].is_string())
    return refuse("id", "the body is {\"id\": GLOB}, the mute's id as it was made");
  for (const auto& [k, v] : body.items())
    if (k != "id") return refuse(k, "unknown field '" + k + "'");
  glob = body["id"].get<std::string>();
  if (!is_test_glob(glob)) return refuse("id", "id is a test id or glob, one line of at most 1000 characters");
  return std::nullopt;
}

std::optional<BodyError> parse_bisection(const std::string& text, BisectSpec& s) {
  nlohmann::json body = nlohmann::json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return refuse("", "the body must be a JSON object {\"good\": SHA, \"bad\": SHA, \"job\": NAME, \"step\", \"test\", \"repeat\"}");
  for (const auto& [k, v] : body.items())
    if (k != "good" && k != "bad" && k != "job" && k != "step" && k != "test" && k != "repeat" && k != "metric")
      return refuse(k, "unknown field '" + k + "'");
  for (const char* f : {"good", "bad", "job", "step", "test", "metric"})
    if (body.contains(f) && !body[f].is_string()) return refuse(f, std::string(f) + " must be a string");
  s.good = body.value("good", "");
  s.bad = body.value("bad", "");
  s.job = body.value("job", "");
  s.step = body.value("step", "");
  s.test = body.value("test", "");
  s.metric = body.value("metric", "");
  for (const auto* f : {"good", "bad"}) {
    const std::string v = body.value(f, "");
    if (!matches(v, "[0-9a-f]{40}|[0-9a-f]{64}")) return refuse(f, std::string(f) + " must be a full commit id (40 lowercase hex digits)");
  }
  if (s.job.empty()) return refuse("job", "job is required: the job whose step to bisect");
  if (s.good == s.bad) return refuse("bad", "good and bad are the same commit");
  if (!s.metric.empty() && !s.test.empty()) return refuse("test", "a perf bisection (metric) measures its whole step: no test");
  s.repeat = 1;
  if (body.contains("repeat")) {
    const auto& r = body["repeat"];
    if (r.is_string() && r.get<std::string>() == "auto") s.repeat = 0;
    else if (r.is_number_integer() && r.get<int>() >= 1 && r.get<int>() <= Bisection::kMaxRepeat) s.repeat = r.get<int>();
    else return refuse("repeat", "repeat is \"auto\" or a number of probes per commit from 1 to " + std::to_string(Bisection::kMaxRepeat));
  }
  if (!s.metric.empty()) s.repeat = 1;  // each probe is a sequential comparison already
  return std::nullopt;
}

}  // namespace pto
