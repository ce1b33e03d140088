#include "supervise/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/fd_passing.h"

namespace pto {

void close_fds(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

std::string wire_send(int sock, nlohmann::json body, const std::vector<int>& fds) {
  if (!fds.empty()) body["fds"] = fds.size();
  std::string line = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::size_t sent = 0;
  int waits = 0;
  bool fds_sent = fds.empty();
  while (sent < line.size()) {
    iovec iov{line.data() + sent, line.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control;
    if (!fds_sent) attach_fds(msg, control, fds);
    const ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // A peer that reads nothing for kWireSendSeconds is as good as gone: neither side may hang on the other.
        if (++waits > kWireSendSeconds * 10) return "the peer read nothing for " + std::to_string(kWireSendSeconds) + " s";
        pollfd p{sock, POLLOUT, 0};
        ::poll(&p, 1, 100);
        continue;
      }
      return std::strerror(errno);
    }
    fds_sent = true;
    sent += static_cast<std::size_t>(n);
  }
  return "";
}

WireReader::~WireReader() {
  for (int fd : fds_) ::close(fd);
}

bool WireReader::read(int sock, std::vector<WireMessage>& out) {
  bool open = true;
  for (;;) {
    char data[65536];
    iovec iov{data, sizeof(data)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 64)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) open = false;
      break;
    }
    std::vector<int> came;
    collect_fds(msg, came);
    fds_.insert(fds_.end(), came.begin(), came.end());
    if (n == 0) {
      open = false;
      break;
    }
    buf_.append(data, static_cast<std::size_t>(n));
  }
  for (std::size_t nl; (nl = buf_.find('\n')) != std::string::npos;) {
    WireMessage m;
    m.body = nlohmann::json::parse(buf_.substr(0, nl), nullptr, false);
    buf_.erase(0, nl + 1);
    if (!m.body.is_object()) continue;
    const std::size_t want = m.body.value("fds", 0u);
    for (std::size_t i = 0; i < want && !fds_.empty(); ++i) {
      m.fds.push_back(fds_.front());
      fds_.pop_front();
    }
    out.push_back(std::move(m));
  }
  return open;
}

}  // namespace pto
