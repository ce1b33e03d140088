#pragma once
// Sizes for messages: bytes as "64 GiB", "512 MiB", "1000 bytes" (the largest unit that divides it exactly,
// so a limit is said as it was written), and a step's CPUs and memory.
#include <cstdint>
#include <string>

namespace pto {

std::string format_bytes(std::uint64_t bytes);
/// "1 CPU", "16 CPUs".
std::string cpus_word(long long n);
/// "4 CPUs and 16 GiB", "2 CPUs", "512 MiB": what a step asks of the host beside its cards ("" for nothing).
std::string host_share_words(int cpus, std::uint64_t memory);

}  // namespace pto
