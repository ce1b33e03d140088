#include "task_submit/output_tap.h"
#include "util/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>

namespace pto {

namespace {

constexpr std::size_t kMarkerBytes = 600 * 1024;  // 3,000 cases of a system-tests batch, ~200 bytes each
constexpr std::size_t kTailBytes = 32 * 1024;
constexpr std::size_t kLineBytes = 300;
constexpr std::size_t kHoldBack = 1 << 20;  // pending output beyond which the command waits for its reader
constexpr std::size_t kChunk = 4096;        // at most PIPE_BUF per write once writable: never blocks on a pipe

}  // namespace

OutputTap::~OutputTap() {
  restore();
  for (Stream& s : streams_)
    if (s.read_fd >= 0) ::close(s.read_fd);
}

bool OutputTap::divert() {
  int fds[2][2];
  if (::pipe2(fds[0], O_CLOEXEC) != 0) return false;
  if (::pipe2(fds[1], O_CLOEXEC) != 0) {
    ::close(fds[0][0]), ::close(fds[0][1]);
    return false;
  }
  for (int i = 0; i < 2; ++i) {
    Stream& s = streams_[i];
    s.read_fd = fds[i][0];
    s.write_fd = fds[i][1];
    s.to_fd = i + 1;
    s.saved_fd = ::fcntl(s.to_fd, F_DUPFD_CLOEXEC, 3);
    ::fcntl(s.read_fd, F_SETFL, ::fcntl(s.read_fd, F_GETFL) | O_NONBLOCK);
    ::dup2(s.write_fd, s.to_fd);  // the copy on 1/2 is inherited; the pipe's own ends are close-on-exec
  }
  return true;
}

void OutputTap::restore() {
  for (Stream& s : streams_) {
    if (s.saved_fd >= 0) {
      ::dup2(s.saved_fd, s.to_fd);
      ::close(s.saved_fd);
      s.saved_fd = -1;
    }
    if (s.write_fd >= 0) {
      ::close(s.write_fd);  // the command holds the only write ends now: its exit is our EOF
      s.write_fd = -1;
    }
  }
}

void OutputTap::add_polls(std::vector<pollfd>& fds) const {
  for (const Stream& s : streams_) {
    if (s.read_fd >= 0 && !s.eof && s.pending.size() < kHoldBack) fds.push_back({s.read_fd, POLLIN, 0});
    if (!s.pending.empty()) fds.push_back({s.to_fd, POLLOUT, 0});
  }
}

void OutputTap::on_ready(const std::vector<pollfd>& fds) {
  for (const pollfd& p : fds)
    for (Stream& s : streams_) {
      if (p.fd == s.read_fd && (p.revents & (POLLIN | POLLHUP | POLLERR))) read_from(s);
      if (p.fd == s.to_fd && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR | POLLHUP))) write_on(s);
    }
}

void OutputTap::read_from(Stream& s) {
  char buf[65536];
  while (s.pending.size() < kHoldBack) {
    ssize_t n = ::read(s.read_fd, buf, sizeof buf);
    if (n > 0) {
      s.pending.append(buf, static_cast<std::size_t>(n));
      scan(s, buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      s.eof = true;
      if (!s.line.empty()) keep_line(s.line), s.line.clear();
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
}

void OutputTap::write_on(Stream& s) {
  // A reader that went away: what it would have read is dropped, the command goes on (as with a closed pipe
  // it would have got SIGPIPE; the harness decides, not us).
  ssize_t n = ::write(s.to_fd, s.pending.data(), std::min(s.pending.size(), kChunk));
  if (n > 0) s.pending.erase(0, static_cast<std::size_t>(n));
  else if (n < 0 && errno != EINTR && errno != EAGAIN) s.pending.clear();
}

void OutputTap::scan(Stream& s, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (data[i] == '\n') {
      keep_line(s.line);
      s.line.clear();
    } else if (s.line.size() < kLineBytes) {
      s.line.push_back(data[i]);
    }
  }
}

void OutputTap::keep_line(const std::string& line) {
  if (line.find("PYPTO_EXEC_RESULT=") != std::string::npos) {  // each case once: in the markers, not the tail
    if (markers_.size() + line.size() < kMarkerBytes) markers_ += line + "\n";
    return;
  }
  tail_ += line + "\n";
  if (tail_.size() > 2 * kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
}

void OutputTap::drain(int ms) {
  using Clock = std::chrono::steady_clock;
  const auto until = steady_now() + std::chrono::milliseconds(ms);
  while (steady_now() < until) {
    std::vector<pollfd> fds;
    add_polls(fds);
    if (fds.empty()) break;
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - steady_now()).count());
    if (::poll(fds.data(), fds.size(), std::max(1, left)) <= 0) break;
    on_ready(fds);
  }
  // Whatever a stalled reader has not taken by now is written blocking: the command is over, nothing to heartbeat.
  for (Stream& s : streams_) {
    while (!s.pending.empty()) {
      ssize_t n = ::write(s.to_fd, s.pending.data(), s.pending.size());
      if (n > 0) s.pending.erase(0, static_cast<std::size_t>(n));
      else if (!(n < 0 && errno == EINTR)) break;
    }
    if (!s.line.empty()) keep_line(s.line), s.line.clear();
  }
}

std::string OutputTap::evidence() const {
  std::string tail = tail_.size() > kTailBytes ? tail_.substr(tail_.size() - kTailBytes) : tail_;
  if (auto nl = tail.find('\n'); tail_.size() > kTailBytes && nl != std::string::npos) tail.erase(0, nl + 1);
  return markers_ + tail;
}

}  // namespace pto
