#pragma once
// Unpredictable hex strings from OpenSSL's CSPRNG: tokens, run id suffixes, temp names, the stop-commands
// token of GitHub output. One source, so no caller picks a weak one (std::random_device may be a PRNG).
#include <cstddef>
#include <string>

namespace pto {

/// `bytes` random bytes as 2*bytes lowercase hex digits.
std::string random_hex(std::size_t bytes);

}  // namespace pto
