#pragma once
// Reading a small file a person points pto-runner at (a token file, runner.yml, a job file) without ever
// blocking and only when it is a regular file: a FIFO would hang `serve` before it listens, a directory would
// read as empty. Each wrong kind of file gets its own message.
#include <cstddef>
#include <string>

namespace pto {

/// Reads `path` whole into `text` (at most `max_bytes`). On failure returns false and sets `error` to a
/// sentence about `path` ("/etc/pto-runner/token is a FIFO (named pipe), not a file").
bool read_regular_file(const std::string& path, std::size_t max_bytes, std::string& text, std::string& error);

}  // namespace pto
