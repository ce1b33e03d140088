#pragma once
// The one way pto-runner turns JSON into text. User files can hold any bytes; nlohmann::json throws on invalid
// UTF-8 by default, so every dump goes through here and replaces such bytes with U+FFFD instead.
#include <string>

#include <nlohmann/json.hpp>

namespace pto {

inline std::string dump_json(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pto
