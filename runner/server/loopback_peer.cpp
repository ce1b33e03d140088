#include "server/loopback_peer.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace pto {

namespace {

// The kernel's hex form of an endpoint in /proc/net/tcp: the address as the 32-bit words in host order
// (printed with %08X each), then ":PORT" in hex.
std::string proc_form(const boost::asio::ip::tcp::endpoint& ep) {
  char buf[64];
  const auto a = ep.address();
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    std::uint32_t word;
    std::memcpy(&word, b.data(), 4);
    std::snprintf(buf, sizeof buf, "%08X:%04X", word, ep.port());
    return buf;
  }
  const auto b = a.to_v6().to_bytes();
  std::string out;
  for (int i = 0; i < 16; i += 4) {
    std::uint32_t word;
    std::memcpy(&word, b.data() + i, 4);
    std::snprintf(buf, sizeof buf, "%08X", word);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ":%04X", ep.port());
  return out + buf;
}

}  // namespace

int loopback_peer_uid(const boost::asio::ip::tcp::endpoint& local, const boost::asio::ip::tcp::endpoint& remote) {
  if (!remote.address().is_loopback()) return -1;
  const std::string client = proc_form(remote), server = proc_form(local);
  std::ifstream table(remote.address().is_v4() ? "/proc/net/tcp" : "/proc/net/tcp6");
  std::string line;
  std::getline(table, line);  // header
  while (std::getline(table, line)) {
    // "  sl  local_address rem_address   st tx_queue:rx_queue tr:tm->when retrnsmt   uid ..."
    char sl[16], loc[64], rem[64], st[8], queues[32], timer[32], retr[16];
    unsigned uid = 0;
    if (std::sscanf(line.c_str(), "%15s %63s %63s %7s %31s %31s %15s %u", sl, loc, rem, st, queues, timer, retr, &uid) != 8) continue;
    if (client == loc && server == rem) return static_cast<int>(uid);
  }
  return -1;
}

}  // namespace pto
