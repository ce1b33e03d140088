#include "sched/card_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pto {

std::string CardLock::path_for(const std::string& dir, int card) {
  return dir + "/npu-" + std::to_string(card) + ".lock";
}

static std::string read_holder(int fd) {
  char buf[256] = {0};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s.empty() ? "another process" : s;
}

std::optional<CardLock> CardLock::try_acquire(const std::string& dir, int card, const std::string& label,
                                              std::string& holder, std::string& error) {
  std::string path = path_for(dir, card);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    error = "cannot open card lock " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) holder = read_holder(fd);
    else error = "cannot lock " + path + ": " + std::strerror(errno);
    ::close(fd);
    return std::nullopt;
  }
  std::string who = "pid " + std::to_string(getpid()) + " (" + label + ")\n";
  if (::ftruncate(fd, 0) == 0) {
    ssize_t ignored = ::pwrite(fd, who.data(), who.size(), 0);
    (void)ignored;
  }
  return CardLock(fd, card);
}

bool CardLock::held_elsewhere(const std::string& dir, int card, std::string& holder) {
  int fd = ::open(path_for(dir, card).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = false;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    held = errno == EWOULDBLOCK;
    if (held) holder = read_holder(fd);
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return held;
}

CardLock& CardLock::operator=(CardLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    card_ = o.card_;
    o.fd_ = -1;
  }
  return *this;
}

CardLock::~CardLock() {
  if (fd_ >= 0) {
    // Leave the file (others may have it open) but clear the holder line before the kernel drops the lock.
    if (::ftruncate(fd_, 0) != 0) { /* best effort */ }
    ::close(fd_);
  }
}

}  // namespace pto
