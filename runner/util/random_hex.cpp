#include "util/random_hex.h"

#include <sys/random.h>

#include <openssl/rand.h>

#include <cerrno>
#include <random>
#include <vector>

namespace pto {

namespace {

/// The kernel's CSPRNG (getrandom), as OpenSSL seeds itself from: one system call, where RAND_bytes's
/// locking and DRBG were a fortieth of the daemon's work per lease (bench/README.md). OpenSSL's when the
/// kernel has no getrandom; random_device (the kernel's pool on Linux) when OpenSSL cannot seed itself.
void fill_random(unsigned char* buf, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(buf + got, n - got, 0);
    if (r > 0) {
      got += static_cast<std::size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      break;
    }
  }
  if (got == n) return;
  if (RAND_bytes(buf, static_cast<int>(n)) == 1) return;
  std::random_device rd;
  for (std::size_t i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(rd());
}

}  // namespace

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  fill_random(buf.data(), buf.size());
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
