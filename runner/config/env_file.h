#pragma once
// runner.yml `env-file`: the host's environment for steps in the format of a GitHub runner's `.env`: one
// KEY=VALUE per line, the value taken as written (no quotes undone, no expansion), blank lines and `#` lines
// skipped. A line that is not KEY=VALUE is an error at its line and column; nothing is half read.
#include <map>
#include <string>

#include "config/diagnostics.h"

namespace pto {

std::map<std::string, std::string> load_env_file(const std::string& path, const std::string& display, Diagnostics& diags);

}  // namespace pto
