#pragma once
// Answer: what a command came to (a submission, a cancel, a drain, a lease), as the HTTP status the API
// answers with and a JSON body. The host's commands (daemon/, lease/lease_desk) answer in it; the API
// (server/api) turns it into HTTP. Here, below both, so neither includes the other.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

enum class Outcome {
  Ok = 200, Created = 201, Accepted = 202, BadRequest = 400, NotFound = 404, Conflict = 409, Gone = 410,
  Unavailable = 503, TimedOut = 504
};

struct Answer {
  Outcome outcome = Outcome::Ok;
  nlohmann::json body = nlohmann::json::object();
  static Answer error(Outcome o, const std::string& why) { return {o, {{"error", why}}}; }
};

/// How a command that finishes later (a submission, a lease grant) answers.
using Reply = std::function<void(Answer)>;

}  // namespace pto
