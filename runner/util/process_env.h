#pragma once
// This process's environment and executable, and quoting for bash command lines: shared by `run`, the
// daemon and the synchronous helpers that start processes.
#include <map>
#include <string>
#include <vector>

namespace pto {

/// The environment as NAME -> value, leaving out names that start with `drop_prefix` (when not empty).
std::map<std::string, std::string> environment_map(const std::string& drop_prefix = "");
/// The environment as NAME=value strings.
std::vector<std::string> environment_list();
/// `s` as one single-quoted bash word.
std::string shell_quote(const std::string& s);
/// `name` as found on $PATH (/usr/bin:/bin without one): the first executable candidate, "" when none.
std::string find_on_path(const std::string& name);
/// The running binary (/proc/self/exe), or "pto-runner" when it cannot be read.
std::string self_executable();

}  // namespace pto
