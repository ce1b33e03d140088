#pragma once
// GitHub Actions' file commands, as a step writes them: $GITHUB_ENV, $GITHUB_PATH and $GITHUB_OUTPUT are
// files the step appends to; the engine reads them when the step has ended.
//
// GITHUB_ENV and GITHUB_OUTPUT hold `NAME=value` lines and `NAME<<DELIMITER` blocks whose value is every
// line up to a line equal to DELIMITER (so values may span lines and hold `=`); empty lines are skipped.
// GITHUB_PATH holds one directory per line. A malformed file fails the step, as in GitHub.
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace pto {

using NameValues = std::vector<std::pair<std::string, std::string>>;

/// Parses a GITHUB_ENV / GITHUB_OUTPUT file's text. On a problem returns false with `error` naming the line.
bool parse_name_value_file(const std::string& text, NameValues& out, std::string& error);

/// The directories of a GITHUB_PATH file, in file order (later ones take precedence when prepended).
std::vector<std::string> parse_path_file(const std::string& text);

/// Reads a file a step wrote, at most `max_bytes`, opened without following a link and without blocking;
/// false (with `error`) when it is a link, not a regular file, not owned by `owner` (the run's sandbox user,
/// or the daemon), larger or unreadable. A missing file reads as empty.
bool read_step_file(const std::string& path, uid_t owner, std::string& text, std::string& error, std::size_t max_bytes = 1 << 20,
                    bool* found = nullptr);

}  // namespace pto
