#pragma once
// The API's JSON answers, one shape for every endpoint: a body, or {"error": why} with its status.
#include <string>

#include <nlohmann/json.hpp>

#include "server/http_server.h"
#include "util/json_text.h"

namespace pto {

inline HttpResponse json_response(int status, const nlohmann::json& j) { return {status, "application/json", dump_json(j), {}}; }
inline HttpResponse error_response(int status, const std::string& why) { return json_response(status, {{"error", why}}); }

}  // namespace pto
