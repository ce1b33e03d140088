#pragma once
// The supervisor's wire (supervise/): one JSON object a line over a Unix stream socket, with file descriptors
// beside a message (SCM_RIGHTS: a step's card flocks, so they outlive the daemon). A message that carries
// descriptors says how many ("fds": N); they are the next N the socket delivered, in order, as the kernel
// delivers a message's descriptors with its first byte.
#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pto {

constexpr int kWireSendSeconds = 10;

struct WireMessage {
  nlohmann::json body;
  std::vector<int> fds;  // received with it (close-on-exec); the receiver owns them
};

/// Closes each descriptor and empties the list (descriptors a message brought, or a step's flocks let go).
void close_fds(std::vector<int>& fds);

/// Sends `body` as one line with `fds` beside it, whole (blocking while the socket is full, at most
/// kWireSendSeconds). "" or the error.
std::string wire_send(int sock, nlohmann::json body, const std::vector<int>& fds = {});

/// Reads one socket's messages as they come (its descriptor non-blocking).
class WireReader {
 public:
  ~WireReader();
  /// What is there now, as whole messages appended to `out`. False when the peer closed or the socket failed
  /// (what was whole before is still appended).
  bool read(int sock, std::vector<WireMessage>& out);

 private:
  std::string buf_;
  std::deque<int> fds_;  // received, not yet given to a message
};

}  // namespace pto
