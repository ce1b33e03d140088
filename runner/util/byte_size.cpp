#include "util/byte_size.h"

namespace pto {

std::string format_bytes(std::uint64_t b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) b /= 1024, ++u;
  return std::to_string(b) + " " + units[u];
}

std::string cpus_word(long long n) { return n == 1 ? "1 CPU" : std::to_string(n) + " CPUs"; }

std::string host_share_words(int cpus, std::uint64_t memory) {
  std::string out = cpus > 0 ? cpus_word(cpus) : "";
  if (memory > 0) out += (out.empty() ? "" : " and ") + format_bytes(memory);
  return out;
}

}  // namespace pto
