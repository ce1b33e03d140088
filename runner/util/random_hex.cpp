#include "util/random_hex.h"

#include <openssl/rand.h>

#include <random>
#include <vector>

namespace pto {

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    // Only when OpenSSL cannot seed itself; random_device reads the kernel's pool on Linux.
    std::random_device rd;
    for (auto& b : buf) b = static_cast<unsigned char>(rd());
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char b : buf) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace pto
