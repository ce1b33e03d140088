#include "util/fd_passing.h"

#include <cstring>

namespace pto {

void attach_fds(msghdr& msg, std::vector<char>& control, const std::vector<int>& fds) {
  if (fds.empty()) return;
  control.assign(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
}

void collect_fds(msghdr& msg, std::vector<int>& out) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        out.push_back(fd);
      }
    }
}

}  // namespace pto
