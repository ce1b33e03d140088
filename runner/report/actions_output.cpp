#include "report/actions_output.h"

#include <cstdlib>

#include "util/random_hex.h"

namespace pto {

std::string escape_command_data(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}

std::string escape_command_property(std::string_view s) {
  std::string out;
  for (char c : escape_command_data(s)) {
    if (c == ':') out += "%3A";
    else if (c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

std::string workflow_command(std::string_view name, const CommandProperties& props, std::string_view message) {
  std::string out = "::";
  out += name;
  for (std::size_t i = 0; i < props.size(); ++i) {
    out += i == 0 ? " " : ",";
    out += props[i].first + "=" + escape_command_property(props[i].second);
  }
  out += "::" + escape_command_data(message) + "\n";
  return out;
}

bool inside_github_actions() {
  const char* v = std::getenv("GITHUB_ACTIONS");
  return v && std::string_view(v) == "true";
}

void ActionsOutput::command(std::string_view name, const CommandProperties& props, std::string_view message) {
  if (!github_) return;
  std::string line = workflow_command(name, props, message);
  std::fwrite(line.data(), 1, line.size(), out_);
}

void ActionsOutput::text(std::string_view untrusted) {
  Block b(*this);
  b.write(untrusted);
}

ActionsOutput::Block::Block(ActionsOutput& o) : o_(o) {
  if (!o_.github_) return;
  token_ = random_hex(16);
  std::fprintf(o_.out_, "::stop-commands::%s\n", token_.c_str());
}

void ActionsOutput::Block::write(std::string_view bytes) {
  if (bytes.empty()) return;
  std::fwrite(bytes.data(), 1, bytes.size(), o_.out_);
  at_line_start_ = bytes.back() == '\n';
}

ActionsOutput::Block::~Block() {
  if (!at_line_start_) std::fputc('\n', o_.out_);
  // The runner resumes only on this exact token, on a line of its own.
  if (o_.github_) std::fprintf(o_.out_, "::%s::\n", token_.c_str());
  std::fflush(o_.out_);
}

std::string json_without_workflow_commands(std::string json) {
  for (std::size_t p = 0; (p = json.find("##[", p)) != std::string::npos;) json.replace(p + 1, 1, "\\u0023");
  return json;
}

}  // namespace pto
