#pragma once
// SHA-256 through OpenSSL's EVP interface: of a string (step keys) and of a file, streamed (toolchain archives).
#include <optional>
#include <string>

namespace pto {

std::string sha256_hex(const std::string& data);
/// Streams the file in 1 MiB chunks; nothing when it cannot be read (errno is left set).
std::optional<std::string> sha256_file_hex(const std::string& path);

}  // namespace pto
