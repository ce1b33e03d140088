#pragma once
// One notification receiver as the status and /metrics show it (notify/notifier keeps it; read_model/ holds
// the copy the API renders).
#include <string>

namespace pto {

struct ReceiverStatus {
  std::string name, kind, url;  // url: scheme and host only (Feishu's and Slack's URLs hold a token)
  long long pending = 0, delivered = 0, failures = 0;  // delivered and failures: messages since the daemon started
  long long dropped = 0;         // events dropped past its max-pending, since the daemon started
  bool failing = false;          // its last attempt failed
  std::string failing_since;     // ISO time of the first failure of the current spell
  std::string last_error;
  std::string last_delivered;    // ISO time
};

}  // namespace pto
