#include "util/daemon_log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "util/json_text.h"

namespace pto {

namespace {

// %* : the message as a JSON string (quotes, escapes), so a message holding quotes or newlines stays one
// valid JSON line.
class JsonMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string text = dump_json(nlohmann::json(std::string(msg.payload.data(), msg.payload.size())));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessage>(); }
};

}  // namespace

std::string setup_daemon_log(const std::string& format, const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return "--log-level must be one of trace, debug, info, warn, error, critical, off (got '" + level + "')";
  auto logger = spdlog::stderr_color_mt("serve");
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (format == "json") {
    formatter->add_flag<JsonMessage>('*').set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":%*})");
  } else if (format == "text") {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v");
  } else {
    return "--log-format must be text or json (got '" + format + "')";
  }
  logger->set_formatter(std::move(formatter));
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return "";
}

}  // namespace pto
