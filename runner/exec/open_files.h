#pragma once
// Which processes have a file open, read from /proc/PID/fd as fuser(1) does: the way to see that a card is in
// use by something no lock says (a detached leftover of the incumbent task-submit's task, whose wrapper held
// the card's flock and has exited). Files are compared by device and inode, so a link to the same node counts.
#include <string>
#include <vector>

namespace pto {

struct FileUser {
  int pid = 0;
  std::string comm;  // /proc/PID/comm
  std::string path;  // which of the asked-for files it has open
  std::string describe() const;  // "pid 812 (python3) has /dev/davinci3 open"
};

/// Processes other than this one that have one of `paths` open. Paths that do not exist are left out; when
/// none exists, /proc is not read at all (a host without the cards' files pays nothing).
std::vector<FileUser> processes_with_open(const std::vector<std::string>& paths);

}  // namespace pto
