#pragma once
// Unpredictable hex strings from the kernel's CSPRNG (getrandom; OpenSSL's where it has none): tokens, run id
// suffixes, lease ids, temp names, the stop-commands token of GitHub output. One source, so no caller picks a
// weak one (std::random_device may be a PRNG).
#include <cstddef>
#include <string>

namespace pto {

/// `bytes` random bytes as 2*bytes lowercase hex digits.
std::string random_hex(std::size_t bytes);

}  // namespace pto
