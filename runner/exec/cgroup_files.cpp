#include "exec/cgroup_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <utility>

namespace pto::cgroup_files {

namespace {

struct Kept {
  std::mutex mu;
  std::map<std::pair<std::string, int>, int> fds;  // (path, flags) -> descriptor
};

Kept& kept() {
  static auto* k = new Kept;  // never destroyed: cgroups are cleaned up by destructors at exit
  return *k;
}

int open_kept(Kept& k, const std::string& path, int flags) {
  auto key = std::make_pair(path, flags);
  auto it = k.fds.find(key);
  if (it != k.fds.end()) return it->second;
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return -1;
  k.fds.emplace(std::move(key), fd);
  return fd;
}

void drop(Kept& k, const std::string& path, int flags) {
  auto it = k.fds.find({path, flags});
  if (it == k.fds.end()) return;
  ::close(it->second);
  k.fds.erase(it);
}

bool read_whole(int fd, std::string& out) {
  out.clear();
  char buf[4096];
  for (off_t at = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0) return false;
    out.append(buf, static_cast<std::size_t>(n));
    // A cgroup file is made whole at each read (a seq_file): one shorter than asked for is all of it, and
    // reading on at its end would make it all over again, for nothing (twice the kernel's work a step).
    if (static_cast<std::size_t>(n) < sizeof buf) return true;
    at += n;
  }
}

}  // namespace

std::string read(const std::string& path) {
  Kept& k = kept();
  std::lock_guard<std::mutex> g(k.mu);
  std::string out;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = open_kept(k, path, O_RDONLY);
    if (fd < 0) return {};
    if (read_whole(fd, out)) return out;
    drop(k, path, O_RDONLY);  // its cgroup went away (ENODEV) and perhaps came back: opened again
  }
  return {};
}

int descriptor(const std::string& path, int flags) {
  Kept& k = kept();
  std::lock_guard<std::mutex> g(k.mu);
  return open_kept(k, path, flags);
}

void forget(const std::string& dir) {
  Kept& k = kept();
  std::lock_guard<std::mutex> g(k.mu);
  for (auto it = k.fds.lower_bound({dir, 0}); it != k.fds.end();) {
    const std::string& p = it->first.first;
    if (p.compare(0, dir.size(), dir) != 0) break;
    if (p.size() == dir.size() || p[dir.size()] == '/') {
      ::close(it->second);
      it = k.fds.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pto::cgroup_files
