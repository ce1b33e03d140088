#pragma once
// Who may open a card's device files: a step (or a lease's command) may open only its own cards' files and
// the shared control files, as systemd-logind's uaccess gives a seat's user its devices. The card files stay
// root's and closed to everyone else; the run's sandbox user gets a POSIX ACL entry (read and write) on its
// cards' files while it holds them, taken away when the cards are given back. Files that do not exist are
// left alone (a host without them, the tests' stand-ins made later).
#include <sys/types.h>

#include <string>
#include <vector>

namespace pto {

/// Gives `uid` rw on each of `files`. "" or the first problem (the file, and why).
std::string grant_file_access(const std::vector<std::string>& files, uid_t uid);
/// Takes it away again. "" or the first problem.
std::string revoke_file_access(const std::vector<std::string>& files, uid_t uid);
/// Whether `uid` has an entry of its own on `file` (for the tests and doctor).
bool has_file_access(const std::string& file, uid_t uid);

}  // namespace pto
