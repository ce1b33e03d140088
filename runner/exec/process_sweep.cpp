#include "exec/process_sweep.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace pto {

namespace {

// Reads /proc/<pid>/environ (NUL-separated); empty when unreadable (gone, or another user's).
std::string read_environ(int pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/environ";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0 && out.size() < (1 << 20)) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

template <typename Match>
std::vector<int> scan(Match&& match) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  const int self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end || pid <= 1 || pid == self) continue;
    std::string env = read_environ(static_cast<int>(pid));
    std::size_t pos = 0;
    while (pos < env.size()) {
      std::size_t z = env.find('\0', pos);
      if (z == std::string::npos) z = env.size();
      if (match(std::string_view(env).substr(pos, z - pos))) {
        out.push_back(static_cast<int>(pid));
        break;
      }
      pos = z + 1;
    }
  }
  ::closedir(d);
  return out;
}

}  // namespace

std::vector<int> find_marked_processes(const std::string& marker) {
  const std::string want = std::string(kStepMarkVar) + "=" + marker;
  return scan([&](std::string_view var) { return var == want; });
}

std::vector<int> find_processes_with_mark_prefix(const std::string& prefix) {
  const std::string want = std::string(kStepMarkVar) + "=" + prefix;
  return scan([&](std::string_view var) { return var.substr(0, want.size()) == want; });
}

int kill_marked_processes(const std::string& marker, int sig, int rounds) {
  int total = 0;
  for (int r = 0; r < rounds; ++r) {
    auto pids = find_marked_processes(marker);
    if (pids.empty()) break;
    for (int pid : pids)
      if (::kill(pid, sig) == 0) ++total;
    // Give the kernel a moment to tear them down before looking again.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return total;
}

}  // namespace pto
