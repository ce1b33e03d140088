#pragma once
// Reading a bearer token from its file, one rule for every reader (the daemon's admin token, `submit`,
// `status`, `devices`, `task-submit`): a regular file (never a FIFO or a directory: util/regular_file), its
// first line with surrounding white space trimmed, at least kMinTokenLength characters (a shorter one is a
// mistake, not a secret).
#include <cstddef>
#include <string>

namespace pto {

constexpr std::size_t kMinTokenLength = 16;

/// The token in `path`, or "" with `error` set to a sentence naming the file.
std::string read_token_file(const std::string& path, std::string& error);
/// The same for a token the daemon accepts (the admin and read tokens): also refused when users other than
/// its owner may read the file (a token others could read is no secret).
std::string read_private_token_file(const std::string& path, std::string& error);

}  // namespace pto
