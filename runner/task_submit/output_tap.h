#pragma once
// OutputTap: what a leased command prints, passed through to task-submit's own stdout and stderr unchanged (a
// harness reads them), while the lines that are evidence for the daemon are kept: every pypto harness marker
// (`PYPTO_EXEC_RESULT=PASS|FAIL|INFRA device=N`, one per case) and the last lines (where a card fault such as
// `507018` shows). Sent with the lease's release, so a lease's failures count for its cards (SPEC "Every red
// is true": leases too) even when the harness keeps its batches' output to itself.
//
// The command gets the tap's pipes as its stdout and stderr and inherits everything else, as before. Writes to
// our own stdout never block the loop that heartbeats: pending output is written as the reader takes it, and
// the command is held back (its pipe fills) while more than a megabyte waits.
#include <poll.h>

#include <string>
#include <vector>

namespace pto {

class OutputTap {
 public:
  OutputTap() = default;
  OutputTap(const OutputTap&) = delete;
  OutputTap& operator=(const OutputTap&) = delete;
  ~OutputTap();

  /// Makes the pipes and points this process's stdout and stderr at them for the spawn that follows; false
  /// (and nothing changed) when pipes cannot be made. Single-threaded callers only.
  bool divert();
  /// After the spawn: this process's stdout and stderr are its own again.
  void restore();

  /// The descriptors to poll for now (appended), then `on_ready` with what poll said of them.
  void add_polls(std::vector<pollfd>& fds) const;
  void on_ready(const std::vector<pollfd>& fds);
  /// After the command ended: what is left in the pipes, for at most `ms` (an escaped process may hold them).
  void drain(int ms);

  /// Marker lines and the output's tail, at most ~640 KiB: the evidence the release carries.
  std::string evidence() const;

 private:
  struct Stream {
    int read_fd = -1;   // our end of the command's pipe
    int write_fd = -1;  // its end, until restore()
    int to_fd = -1;     // where it goes on: 1 or 2
    int saved_fd = -1;  // our own stdout/stderr while diverted
    std::string pending;  // read, not yet written on
    std::string line;     // the current line, for the scan
    bool eof = false;
  };
  void read_from(Stream& s);
  void write_on(Stream& s);
  void scan(Stream& s, const char* data, std::size_t n);
  void keep_line(const std::string& line);

  Stream streams_[2];
  std::string markers_;  // every marker line, up to kMarkerBytes
  std::string tail_;     // the last kTailBytes of the output's lines
};

}  // namespace pto
